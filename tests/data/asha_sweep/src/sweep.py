# A learning-rate sweep with known curves (tests/integration/search_test.cc, bench/search_bench.sh):
# loss(step) = (log10(lr) + 2)^2 + offset + 3/sqrt(step) + seed/1000, 150 steps at ~50 a second.
# The best point is lr 0.01 at every offset, and the points keep their order at every step.
import math, sys, time
lr, offset, seed = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
for step in range(1, 151):
    loss = (math.log10(lr) + 2) ** 2 + offset + 3 / math.sqrt(step) + seed / 1000
    print(f"step={step} loss={loss:.6f}", flush=True)
    time.sleep(0.02)

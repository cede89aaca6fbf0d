"""The training tasks of docs/tasks.md: the same rows, in the same order, as tae-train draws.

Every task is a deterministic stream of batches seeded from train.seed plus a fixed set of eval
batches from a second stream. The generator is the one tae-train uses (agent/train/tasks.cc): a
64-bit Mersenne Twister (std::mt19937_64) seeded through SplitMix64 with a stream id, and
uniform integers by rejection (`below`). The row layouts are those of docs/tasks.md; a test
compares these batches with the ones tae-train dumps (tests/train/torch_equivalence_test.py).
"""

import os
import shutil
import subprocess
import tempfile

import torch

from . import spec

MASK64 = (1 << 64) - 1
TRAIN_STREAM = 1
EVAL_STREAM = 2


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


class Mt19937_64:
    """std::mt19937_64 (Matsumoto & Nishimura's MT19937-64), in pure Python."""

    N = 312
    M = 156
    MATRIX_A = 0xB5026F5AA96619E9
    UPPER = 0xFFFFFFFF80000000
    LOWER = 0x7FFFFFFF

    def __init__(self, seed):
        mt = [0] * self.N
        mt[0] = seed & MASK64
        for i in range(1, self.N):
            prev = mt[i - 1]
            mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        self.mt = mt
        self.index = self.N

    def _twist(self):
        mt = self.mt
        n, m, a, up, low = self.N, self.M, self.MATRIX_A, self.UPPER, self.LOWER
        for i in range(n):
            x = (mt[i] & up) | (mt[(i + 1) % n] & low)
            xa = x >> 1
            if x & 1:
                xa ^= a
            mt[i] = mt[(i + m) % n] ^ xa
        self.index = 0

    def next(self):
        if self.index >= self.N:
            self._twist()
        x = self.mt[self.index]
        self.index += 1
        x ^= (x >> 29) & 0x5555555555555555
        x ^= (x << 17) & 0x71D67FFFEDA60000
        x ^= (x << 37) & 0xFFF7EEE000000000
        x ^= x >> 43
        return x & MASK64

    def state(self):
        return list(self.mt) + [self.index]

    def set_state(self, state):
        if not isinstance(state, list) or len(state) != self.N + 1:
            raise ValueError("task stream state: not a generator state")
        self.mt = list(state[:self.N])
        self.index = int(state[self.N])


class TaskRng:
    """tae-train's TaskRng: the engine of (seed, stream) and uniform draws below n."""

    def __init__(self, seed, stream):
        self.engine = Mt19937_64(
            _splitmix64(_splitmix64(seed) ^ _splitmix64(stream + 0x7461650000)))

    def below(self, n):
        limit = MASK64 - MASK64 % n
        draw = self.engine.next()
        while draw >= limit:
            draw = self.engine.next()
        return draw % n


class Batch:
    def __init__(self, inputs, targets, mask):
        self.inputs = inputs    # [B, T] int64
        self.targets = targets  # [B, T] int64
        self.mask = mask        # [B, T] float32, 1 = scored


def _batch_from_rows(rows, scored, seq_len, hide_answers, mask_token):
    rows_t = torch.tensor(rows, dtype=torch.long)
    mask = torch.tensor(scored, dtype=torch.float32)
    inputs = rows_t[:, :seq_len].contiguous()
    targets = rows_t[:, 1:].contiguous()
    if hide_answers:  # input p + 1 is the answer of scored position p
        inputs[:, 1:seq_len].masked_fill_(mask[:, :seq_len - 1] > 0, mask_token)
    return Batch(inputs, targets, mask)


class _Stream:
    """Train stream + fixed eval batches of a row generator `fill(rng, row, scored)`."""

    def __init__(self, vocab_size, chance, seed, eval_batches, generate):
        self.vocab_size = vocab_size
        self.chance = chance
        self._generate = generate
        self.train_rng = TaskRng(seed, TRAIN_STREAM)
        eval_rng = TaskRng(seed, EVAL_STREAM)
        self.eval_batches = [generate(eval_rng) for _ in range(eval_batches)]

    def next_train_batch(self):
        return self._generate(self.train_rng)

    def save_stream_state(self):
        return self.train_rng.engine.state()

    def restore_stream_state(self, state):
        self.train_rng.engine.set_state(state)


def _synthetic(t, hide_answers, special, fill):
    vocab, seq_len, batch = t.vocab, t.seq_len, t.batch_size
    sep, pad, mask_token = vocab, vocab + 1, vocab + 2

    def generate(rng):
        rows, scored = [], []
        for _ in range(batch):
            row = [pad] * (seq_len + 1)
            s = [0.0] * seq_len
            fill(rng, row, s, sep)
            rows.append(row)
            scored.append(s)
        return _batch_from_rows(rows, scored, seq_len, hide_answers, mask_token)

    return _Stream(vocab + special, 1.0 / vocab, t.seed, t.eval_batches, generate)


def _check_shape(task, t):
    """ValueError naming train.vocab or train.seq_len when the shape leaves no room for the
    task's layout (spec.py's table, the port of common/spec/task_checks.cc)."""
    problem = spec.task_shape_problem(task, t.vocab, t.seq_len)
    if problem:
        raise ValueError(f"{problem[0]}: {problem[1]}")


def _copy(t, hide_answers):
    vocab, seq_len, batch = t.vocab, t.seq_len, t.batch_size
    length = seq_len // 2
    sep, pad, mask_token = vocab, vocab + 1, vocab + 2

    def generate(rng):
        rows = []
        for _ in range(batch):
            row = [pad] * (seq_len + 1)
            for i in range(length):
                row[i] = rng.below(vocab)
                row[length + 1 + i] = row[i]
            row[length] = sep
            rows.append(row)
        rows_t = torch.tensor(rows, dtype=torch.long)
        inputs = rows_t[:, :seq_len].contiguous()
        targets = rows_t[:, 1:].contiguous()
        if hide_answers:
            inputs[:, length + 1:min(2 * length + 1, seq_len)] = mask_token
        mask = torch.zeros(batch, seq_len)
        mask[:, length:2 * length] = 1.0
        return Batch(inputs, targets, mask)

    return _Stream(vocab + 3, 1.0 / vocab, t.seed, t.eval_batches, generate)


def _order(name, sort, t, hide_answers):
    _check_shape(name, t)
    length = t.seq_len // 2
    vocab = t.vocab

    def fill(rng, row, scored, sep):
        s = [rng.below(vocab) for _ in range(length)]
        row[:length] = s
        row[length] = sep
        row[length + 1:2 * length + 1] = sorted(s) if sort else s[::-1]
        for p in range(length, 2 * length):
            scored[p] = 1.0

    return _synthetic(t, hide_answers, 3, fill)


def _assoc_recall(t, hide_answers):
    _check_shape("assoc_recall", t)
    keys = t.vocab // 2
    values = t.vocab - keys
    pairs = min(keys, t.seq_len // 4)
    queries = t.seq_len // 2 - pairs

    def fill(rng, row, scored, sep):
        symbols = list(range(keys))
        for i in range(pairs):
            j = i + rng.below(keys - i)
            symbols[i], symbols[j] = symbols[j], symbols[i]
            row[2 * i] = symbols[i]
            row[2 * i + 1] = keys + rng.below(values)
        row[2 * pairs] = sep
        for j in range(queries):
            pair = rng.below(pairs)
            query = 2 * pairs + 1 + 2 * j
            row[query] = row[2 * pair]
            row[query + 1] = row[2 * pair + 1]
            scored[query] = 1.0

    return _synthetic(t, hide_answers, 3, fill)


def _induction(t, hide_answers):
    _check_shape("induction", t)
    row_len = t.seq_len + 1
    max_block = row_len // 2
    vocab = t.vocab

    def fill(rng, row, scored, sep):
        block = 2 + rng.below(max_block - 2 + 1)
        for i in range(block):
            row[i] = rng.below(vocab)
        for i in range(block, row_len):
            row[i] = row[i - block]
        for p in range(block, row_len - 1):
            scored[p] = 1.0

    return _synthetic(t, hide_answers, 3, fill)


def _mod_add(t, hide_answers):
    _check_shape("mod_add", t)
    vocab = t.vocab
    problems = (t.seq_len + 1) // 5
    plus, eq = vocab + 3, vocab + 4

    def fill(rng, row, scored, sep):
        for j in range(problems):
            a = rng.below(vocab)
            b = rng.below(vocab)
            row[5 * j:5 * j + 5] = [a, plus, b, eq, (a + b) % vocab]
            scored[5 * j + 3] = 1.0

    return _synthetic(t, hide_answers, 5, fill)


KJV_COMMAND = ["bible", "-f", "gen1:1-rev22:21"]
MIN_KJV_BYTES = 1 << 20


def default_kjv_cache_path():
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = xdg if xdg.startswith("/") else os.path.join(os.environ.get("HOME", "/tmp"), ".cache")
    return os.path.join(base, "tae", "kjv.txt")


def load_kjv_text(cache_path):
    """The KJV text from the cache tae-train shares, else from `bible` (then cached)."""
    try:
        if os.path.getsize(cache_path) >= MIN_KJV_BYTES:
            with open(cache_path, "rb") as f:
                return f.read()
    except OSError:
        pass
    if shutil.which("bible") is None:
        raise RuntimeError("lm task: train.data is empty, so the King James Bible is used, but "
                           "the `bible` program is not on PATH: install it with `apt-get install "
                           "bible-kjv` or set train.data")
    done = subprocess.run(KJV_COMMAND, stdout=subprocess.PIPE, check=False)
    if done.returncode != 0 or len(done.stdout) < MIN_KJV_BYTES:
        raise RuntimeError(f"lm task: `{' '.join(KJV_COMMAND)}` failed (status "
                           f"{done.returncode}, {len(done.stdout)} bytes); is bible-kjv "
                           "installed completely?")
    try:
        os.makedirs(os.path.dirname(cache_path), exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(cache_path), prefix="kjv.txt.tmp.")
        with os.fdopen(fd, "wb") as f:
            f.write(done.stdout)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, cache_path)
    except OSError as e:
        print(f"tae-torch: warning: KJV cache not written: {e}", flush=True)
    return done.stdout


def _lm(t):
    if t.data:
        if os.path.isdir(t.data):
            raise RuntimeError(f'lm task: train.data "{t.data}" is a directory, not a text file')
        try:
            with open(t.data, "rb") as f:
                text = f.read()
        except OSError as e:
            raise RuntimeError(f'lm task: cannot read train.data file "{t.data}": '
                               f"{e.strerror}") from None
    else:
        text = load_kjv_text(default_kjv_cache_path())
    size = len(text)
    train_end = size // 10 * 9 + (size % 10) * 9 // 10
    row_len = t.seq_len + 1
    if train_end < row_len or size - train_end < row_len:
        raise RuntimeError(f"lm task: text of {size} bytes is too short for train.seq_len "
                           f"{t.seq_len} (each of the 90%/10% train/eval splits needs at least "
                           f"{row_len} bytes)")
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8)
    offsets = torch.arange(row_len)

    def windows(rng, begin, end):
        starts = torch.tensor([begin + rng.below(end - begin - row_len + 1)
                               for _ in range(t.batch_size)])
        rows = data[starts.unsqueeze(1) + offsets].long()
        return Batch(rows[:, :t.seq_len].contiguous(), rows[:, 1:].contiguous(),
                     torch.ones(t.batch_size, t.seq_len))

    stream = _Stream.__new__(_Stream)
    stream.vocab_size = 256
    stream.chance = 1.0 / 256
    stream._generate = lambda rng: windows(rng, 0, train_end)
    stream.train_rng = TaskRng(t.seed, TRAIN_STREAM)
    eval_rng = TaskRng(t.seed, EVAL_STREAM)
    stream.eval_batches = [windows(eval_rng, train_end, size) for _ in range(t.eval_batches)]
    return stream


def make_task(config):
    """The task of config.train.task; answers are hidden from bidirectional models."""
    t = config.train
    hide = not config.model.causal
    if t.task == "copy":
        if t.vocab < 2:
            raise ValueError("train.vocab: must be at least 2 for task copy")
        return _copy(t, hide)
    if t.task == "reverse":
        return _order("reverse", False, t, hide)
    if t.task == "sort":
        return _order("sort", True, t, hide)
    if t.task == "assoc_recall":
        return _assoc_recall(t, hide)
    if t.task == "induction":
        return _induction(t, hide)
    if t.task == "mod_add":
        return _mod_add(t, hide)
    return _lm(t)

#!/usr/bin/env python3
"""Lists the tests a ctest run skipped, each with the reason it printed.

    skipped_tests.py CTEST_OUTPUT BUILD_DIR

CTEST_OUTPUT is what ctest printed (its "The following tests did not run:" list names the
skipped tests); the reasons come from BUILD_DIR/Testing/Temporary/LastTest.log: TAE_SKIP's
"TAE-SKIPPED: ..." message (tests/skip.h, wrapped over several lines by Catch) or a script's
"skipped: ..." line. A missing prerequisite (root, gcloud, sshd, python3-torch) is then never
mistaken for a pass.
"""

import os
import re
import sys


def skipped_names(ctest_output):
    names = []
    listing = False
    for line in ctest_output.splitlines():
        if line.startswith("The following tests did not run:"):
            listing = True
            continue
        if listing:
            m = re.match(r"\s+\d+ - (.*) \((Skipped|Not Run|Disabled)\)$", line)
            if not m:
                break
            names.append(m.group(1))
    return names


def reasons(log_text):
    """{test name: reason} from LastTest.log's per-test output blocks."""
    found = {}
    for block in log_text.split("\n----------------------------------------------------------\n\n"):
        m = re.search(r"^\d+/\d+ Test: (.*)$", block, re.M)
        if not m:
            continue
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if "TAE-SKIPPED: " in line:
                words = [line.split("TAE-SKIPPED: ", 1)[1].strip()]
                for more in lines[i + 1:]:  # Catch wraps a long message on indented lines
                    if not more.startswith("  ") or not more.strip():
                        break
                    words.append(more.strip())
                found[m.group(1)] = " ".join(words)
                break
            if line.startswith("skipped: "):
                found[m.group(1)] = line[len("skipped: "):].strip()
                break
    return found


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], errors="replace") as f:
        names = skipped_names(f.read())
    if not names:
        return 0
    log = os.path.join(sys.argv[2], "Testing", "Temporary", "LastTest.log")
    why = {}
    if os.path.exists(log):
        with open(log, errors="replace") as f:
            why = reasons(f.read())
    print(f"\n{len(names)} test(s) skipped, their prerequisites missing on this machine:")
    for name in names:
        print(f"  skipped  {name}: {why.get(name, '(no reason printed)')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

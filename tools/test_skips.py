#!/usr/bin/env python3
"""Lists the tests that skipped, with their reasons, from ctest's JUnit files.

make test installs every tool its tests use, so a skip there means an install step is
missing: this fails (exit 1) on any skip outside the files given with --may-skip (the GPU
tests, which skip on a machine without a GPU).

  test_skips.py [--quiet] [--may-skip JUNIT]... JUNIT...

--quiet prints nothing when no test skipped.
"""
import argparse
import re
import sys
import xml.etree.ElementTree as ET

GTEST_SKIPPED = re.compile(r"^\[  SKIPPED \] ", re.M)


def reason(output):
    """The line a test gave for skipping: 'SKIP: ...' or the message after gtest's 'Skipped'."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("SKIP:"):
            return line[len("SKIP:"):].strip()
        if line.endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
    return "no reason given"


def skipped(path):
    """(name, reason) of each test in one JUnit file that did not run or that gtest skipped."""
    out = []
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        sys.exit(f"test_skips.py: cannot read ctest's JUnit file {path}: {e}")
    for case in root.iter("testcase"):
        text = case.findtext("system-out") or ""
        if case.get("status") == "notrun" or GTEST_SKIPPED.search(text):
            out.append((case.get("name"), reason(text)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--may-skip", action="append", default=[], metavar="JUNIT")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("junit", nargs="*")
    args = ap.parse_args()
    allowed, bad = [], []
    for path in args.may_skip:
        allowed += skipped(path)
    for path in args.junit:
        bad += skipped(path)
    for name, why in allowed:
        print(f"skipped (allowed here): {name}: {why}")
    for name, why in bad:
        print(f"SKIPPED: {name}: {why}")
    if bad:
        print(f"{len(bad)} tests skipped where every tool they need is installed: "
              "an install step is missing", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"no test skipped but {len(allowed)} allowed to" if allowed else "no test skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())

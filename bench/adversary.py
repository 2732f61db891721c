"""The randomized adversary as a long run: `python bench/adversary.py --scenarios 1000 [--jobs 3] [--seed S]
[--results F]`. Seeds are cut into chunks; each chunk runs under one profile (the flags below, in turn) as a
`python -m cdc_assets_tests.adversary` process with its own private servers, `--jobs` chunks at a time. A scenario
uses about a third of a core on its own (most of its time is servers and CLI processes starting and settling), so
three jobs keep two cores busy. Every outcome is appended to `--results` (JSON lines) as it arrives: a run stopped
halfway is continued by the same command, which skips the seeds already there. The summary gives the scenarios,
directions, faults injected, loud stops by kind and every outcome that is not a pass or a documented stop, each
with the command that reruns it."""
from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

# Each chunk's flags: the seed's own draws, then each fault or phase the seed alone does not draw, on every scenario.
PROFILES = {
    "drawn": [],
    "schema-changes": ["--schema-changes"],
    "verify": ["--verify"],
    "restart": ["--restart"],
    "target-away-pg": ["--target-away-pg"],
    "reset": ["--reset"],
    "replan": ["--replan"],
    "schema-changes+verify": ["--schema-changes", "--verify"],
    "mysql-three": ["--direction", "mysql-three"],
    "postgres-three": ["--direction", "postgres-three"],
    "mysql-three+schema-changes": ["--direction", "mysql-three", "--schema-changes"],
    "postgres-three+schema-changes": ["--direction", "postgres-three", "--schema-changes"],
}
GOOD = ("pass", "expected_stop")
OUTCOME = re.compile(r"^seed (\d+) (\S+): (\w+) in (\d+) s; faults (.*)$")
FAULT = re.compile(r"(\w+)\(.*?\) (\w+)")
SUMMARY = re.compile(r"^\d+ scenarios in \d+ s$")
STOP_KINDS = [  # (what the error says, the kind it is: docs/connectors' type mapping, docs/concepts/log-phase.md)
    (r"zero or invalid date|date/time field value out of range|Incorrect (?:date|datetime) value", "zero date"),
    (r"cannot move (?:the row|rows) of", "key move the log leaves incomplete (MoveIncomplete)"),
    (r"DDL on captured table", "schema change (SchemaChangeHalted)"),
]


def chunks(first: int, count: int, size: int) -> list[tuple[int, int, str]]:
    names = list(PROFILES)
    out = []
    for i, start in enumerate(range(first, first + count, size)):
        out.append((start, min(size, first + count - start), names[i % len(names)]))
    return out


def parse(lines: list[str], profile: str) -> list[dict]:
    """The outcome lines of one chunk's output, each with what was printed under it (the stop's output included)."""
    outcomes: list[dict] = []
    for line in lines:
        m = OUTCOME.match(line)
        if m:
            seed, direction, status, seconds, faults = m.groups()
            outcomes.append({"seed": int(seed), "direction": direction, "status": status.lower(),
                             "seconds": int(seconds), "profile": profile, "details": [],
                             "faults": [" ".join(f) for f in FAULT.findall(faults)]})
        elif line.startswith("seed ") or SUMMARY.match(line):
            outcomes and outcomes[-1].setdefault("ended", True)
        elif outcomes and "ended" not in outcomes[-1] and line.strip() and \
                not line.strip().startswith(("timing:", "rerun:")):
            outcomes[-1]["details"].append(line.strip())
    for o in outcomes:
        o.pop("ended", None)
    return outcomes


def stop_kind(details: list[str]) -> str:
    """A documented stop's kind, from the error it printed."""
    text = " ".join(details)
    for pattern, kind in STOP_KINDS:
        if re.search(pattern, text):
            return kind
    error = re.search(r"error: (.*)", text)
    return " ".join((error.group(1) if error else text).split()[:6]) or "?"


class Run:
    def __init__(self, results: Path, log_dir: Path):
        self.results, self.log_dir, self.lock = results, log_dir, threading.Lock()
        # the code each outcome ran on: a long run continued after a fix records which scenarios ran on which
        self.commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                     cwd=Path(__file__).parent).stdout.strip() or "?"
        self.procs: set[subprocess.Popen] = set()
        self.stopping = False

    def done(self) -> set[tuple[int, str]]:
        if not self.results.exists():
            return set()
        return {(o["seed"], o["profile"]) for o in map(json.loads, self.results.read_text().splitlines())}

    def chunk(self, start: int, count: int, profile: str) -> None:
        cmd = [sys.executable, "-m", "cdc_assets_tests.adversary", "--seed", str(start), "--scenarios", str(count),
               *PROFILES[profile]]
        log = self.log_dir / f"{start}-{profile}.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            with self.lock:
                self.procs.add(proc)
            proc.wait()
            with self.lock:
                self.procs.discard(proc)
        outcomes = parse(log.read_text(errors="replace").splitlines(), profile)
        with self.lock, open(self.results, "a") as f:
            for o in outcomes:
                f.write(json.dumps({**o, "commit": self.commit}) + "\n")
        print(f"chunk {start}+{count} {profile}: " + ", ".join(f"{s} x{n}" for s, n in
              sorted(Counter(o["status"] for o in outcomes).items())) + f" (log {log})", flush=True)

    def stop(self, *_) -> None:
        self.stopping = True
        with self.lock:
            for proc in self.procs:
                proc.send_signal(signal.SIGTERM)  # the CLI stops its private servers on SIGTERM


def summary(outcomes: list[dict], seconds: float | None) -> str:
    # A chunk stopped halfway runs again whole when the run is continued: its later outcome of a seed counts.
    outcomes = list({(o["seed"], o["profile"], o["direction"]): o for o in outcomes}.values())
    lines = [f"{len(outcomes)} scenarios" + (f" in {seconds / 60:.0f} min" if seconds else "")]
    lines += [f"  {d}: {n}" for d, n in sorted(Counter(o["direction"] for o in outcomes).items())]
    lines += ["outcomes:"] + [f"  {s}: {n}" for s, n in sorted(Counter(o["status"] for o in outcomes).items())]
    lines += ["loud stops by kind (documented):"] + [
        f"  {k}: {n}" for k, n in sorted(Counter(stop_kind(o["details"]) for o in outcomes
                                                 if o["status"] == "expected_stop").items())]
    lines += ["faults injected:"] + [f"  {f}: {n}" for f, n in sorted(Counter(
        f for o in outcomes for f in o["faults"]).items())]
    lines += ["profiles:"] + [f"  {p}: {n}" for p, n in sorted(Counter(o["profile"] for o in outcomes).items())]
    lines += ["commits:"] + [f"  {c}: {n}" for c, n in sorted(Counter(o.get("commit", "?") for o in outcomes).items())]
    bad = [o for o in outcomes if o["status"] not in GOOD]
    lines += [f"not a pass nor a documented stop: {len(bad)}"]
    for o in bad:
        flags = " ".join(PROFILES[o["profile"]])
        flags = flags if "--direction" in flags else f"--direction {o['direction']} {flags}"
        lines += [f"  seed {o['seed']} {o['direction']} {o['status'].upper()}: "
                  f"{(o['details'] or ['(no detail)'])[0][:300]}",
                  f"    rerun: python -m cdc_assets_tests.adversary --seed {o['seed']} --scenarios 1 {flags}".rstrip()]
    return "\n".join(lines)


def reparse(results: Path) -> None:
    """The outcomes again from the chunks' logs (the last run of each chunk), keeping the commit each ran on."""
    old = [json.loads(line) for line in results.read_text().splitlines()]
    commits = {(o["seed"], o["profile"]): o.get("commit", "?") for o in old}
    out = []
    for log in sorted(results.with_suffix(".logs").glob("*.log")):
        profile = log.stem.split("-", 1)[1]
        for o in parse(log.read_text(errors="replace").splitlines(), profile):
            out.append({**o, "commit": commits.get((o["seed"], profile), "?")})
    results.write_text("".join(json.dumps(o) + "\n" for o in out))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seed", type=int, default=100000, help="the first seed")
    p.add_argument("--scenarios", type=int, default=1000)
    p.add_argument("--jobs", type=int, default=3, help="chunks run at once, each with its own private servers")
    p.add_argument("--chunk", type=int, default=12, help="scenarios per chunk (one start of the servers each)")
    p.add_argument("--results", type=Path, default=Path("adversary-results.jsonl"))
    p.add_argument("--summary", action="store_true", help="print the summary of --results and stop")
    p.add_argument("--reparse", action="store_true",
                   help="read every outcome of --results again from the chunks' logs, then print the summary")
    args = p.parse_args()
    if args.reparse:
        reparse(args.results)
    if args.summary or args.reparse:
        print(summary([json.loads(line) for line in args.results.read_text().splitlines()], None))
        return 0
    log_dir = args.results.with_suffix(".logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    run = Run(args.results, log_dir)
    done = run.done()
    todo = [c for c in chunks(args.seed, args.scenarios, args.chunk)
            if not all((s, c[2]) in done for s in range(c[0], c[0] + c[1]))]
    signal.signal(signal.SIGTERM, run.stop)
    signal.signal(signal.SIGINT, run.stop)
    started, queue = time.monotonic(), list(todo)

    def worker():
        while not run.stopping:
            with run.lock:
                if not queue:
                    return
                start, count, profile = queue.pop(0)
            run.chunk(start, count, profile)

    threads = [threading.Thread(target=worker) for _ in range(args.jobs)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.5)
    outcomes = [json.loads(line) for line in args.results.read_text().splitlines()] if args.results.exists() else []
    print(summary(outcomes, time.monotonic() - started))
    return 1 if any(o["status"] not in GOOD for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())

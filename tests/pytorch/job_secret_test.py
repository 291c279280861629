"""The job secret (CHORUS_JOB_SECRET, CHORUS_JOB_SECRET_FILE) under torch.distributed: ranks that
hold the same secret work; ranks whose secrets differ, or of which only some hold one, fail at
init_process_group (or their first operation) on every rank, within seconds rather than the
group's time-out, with an error that names the secret; a secret chorus refuses (shorter than 16
bytes, a file other users can read, both variables set) fails the group's creation on every rank
naming the variable, as the chorus README says.

    job_secret_test.py CASE...

Each CASE is a job of two ranks of its own, whose variables are set in each rank before it
imports chorus_torch: same, same_file (one rank reads the same secret from a file), differ,
one_missing, short, file_open (mode 0644), both_set. The collective is whatever the environment
picks (AUTO, CHORUS_COMMUNICATION=core_ring). The ranks write what they saw to files; a rank still
running after LIMIT_S counts as a hang. Every case runs; the test fails when one of them did.
"""

import atexit
import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback

import bounded
import harness

SIZE = 2
TIMEOUT_S = 60  # the group's
WITHIN_S = 20  # what a refusal may take, from init_process_group on
LIMIT_S = 35  # a rank still running then (spawn and import included) hangs
SECRET_A = "a" * 24 + "-job-secret-A"
SECRET_B = "b" * 24 + "-job-secret-B"
SECRET_HINT = (r"give every process of the job the same CHORUS_JOB_SECRET or "
               r"CHORUS_JOB_SECRET_FILE")


def write_secret_file(folder, name, secret, mode):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(secret + "\n")
    os.chmod(path, mode)
    return path


def environments(case, folder):
    """Each rank's job-secret variables, and the pattern every rank's error must match (None: the
    job must work)."""
    if case == "same":
        return [{"CHORUS_JOB_SECRET": SECRET_A}] * SIZE, None
    if case == "same_file":
        path = write_secret_file(folder, "secret", SECRET_A, 0o600)
        return [{"CHORUS_JOB_SECRET": SECRET_A}, {"CHORUS_JOB_SECRET_FILE": path}], None
    if case == "differ":
        return [{"CHORUS_JOB_SECRET": SECRET_A}, {"CHORUS_JOB_SECRET": SECRET_B}], (
            r"(?i)secret.*" + SECRET_HINT)
    if case == "one_missing":
        return [{"CHORUS_JOB_SECRET": SECRET_A}, {}], r"(?i)secret.*" + SECRET_HINT
    if case == "short":
        return [{"CHORUS_JOB_SECRET": "0123456789ab"}] * SIZE, (
            r"INVALID_ARGUMENT: .*the job secret from CHORUS_JOB_SECRET has 12 bytes; use at "
            r"least 16")
    if case == "file_open":
        path = write_secret_file(folder, "open_secret", SECRET_A, 0o644)
        return [{"CHORUS_JOB_SECRET_FILE": path}] * SIZE, (
            r"INVALID_ARGUMENT: .*CHORUS_JOB_SECRET_FILE=%s is open to other users \(mode "
            r"0644\); run chmod 600" % re.escape(path))
    if case == "both_set":
        path = write_secret_file(folder, "both_secret", SECRET_A, 0o600)
        return [{"CHORUS_JOB_SECRET": SECRET_A, "CHORUS_JOB_SECRET_FILE": path}] * SIZE, (
            r"INVALID_ARGUMENT: .*both CHORUS_JOB_SECRET and CHORUS_JOB_SECRET_FILE are set; "
            r"set only one")
    raise SystemExit("unknown case %r" % case)


def body(rank, size, init_method, env, results):
    """Joins the job with this rank's variables, runs an all-reduce and a barrier, leaves, and
    writes what happened (ok, or the first error and when) to results/<rank>.json."""
    os.environ.pop("CHORUS_JOB_SECRET", None)
    os.environ.pop("CHORUS_JOB_SECRET_FILE", None)
    os.environ.update(env[rank])
    import torch
    import torch.distributed as dist

    outcome = {"rank": rank}
    start = time.monotonic()
    step = "init_process_group"
    try:
        harness.init(rank, size, init_method, timeout_s=TIMEOUT_S)
        outcome["collective"] = dist.distributed_c10d._get_default_group().collective
        step = "all_reduce"
        t = torch.full((1001,), float(rank + 1))
        dist.all_reduce(t)
        outcome["sum"] = t[0].item()
        step = "barrier"
        dist.barrier()
        step = "destroy_process_group"
        dist.destroy_process_group()
        outcome["ok"] = True
    except Exception as e:  # noqa: BLE001 (reported, judged by the parent)
        outcome["ok"] = False
        outcome["error"] = "%s: %s" % (type(e).__name__,
                                       str(e).split("\nException raised from")[0])
        if not isinstance(e, RuntimeError):
            outcome["traceback"] = traceback.format_exc()
    outcome["step"] = step
    outcome["seconds"] = round(time.monotonic() - start, 2)
    with open(os.path.join(results, "%d.json" % rank), "w") as f:
        json.dump(outcome, f)
    os._exit(0)  # no teardown: in a failed job it could wait on the other rank


def judge(case, expected, outcomes, stragglers):
    """The problems with one case's outcomes ([] when it went as it should)."""
    problems = []
    for rank in range(SIZE):
        o = outcomes.get(rank)
        if rank in stragglers:
            problems.append("rank %d still running %d s after the start (a hang)" %
                            (rank, LIMIT_S))
        elif o is None:
            problems.append("rank %d ended without a result" % rank)
        elif expected is None:
            if not o["ok"]:
                problems.append("rank %d failed at %s: %s" % (rank, o["step"], o["error"]))
            elif o["sum"] != SIZE * (SIZE + 1) / 2:
                problems.append("rank %d: all_reduce gave %s" % (rank, o["sum"]))
        elif o["ok"]:
            problems.append("rank %d joined the job on %s and ran all_reduce and barrier "
                            "(nothing refused)" % (rank, o.get("collective")))
        else:
            if o["step"] not in ("init_process_group", "all_reduce"):  # the "first op"
                problems.append("rank %d failed only at %s" % (rank, o["step"]))
            if o["seconds"] >= WITHIN_S:
                problems.append("rank %d failed after %.1f s (group time-out %d s)" %
                                (rank, o["seconds"], TIMEOUT_S))
            if not re.search(expected, o["error"]):
                problems.append("rank %d's error does not match %r" % (rank, expected))
    return problems


def run_case(case, comm):
    folder = tempfile.mkdtemp(prefix="chorus_torch_secret_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    results = os.path.join(folder, "results")
    os.mkdir(results)
    env, expected = environments(case, folder)
    began = time.monotonic()
    stragglers = bounded.run_killing_stragglers(
        body, SIZE, (harness.file_init_method(), env, results), limit_s=LIMIT_S)
    outcomes = {}
    for rank in range(SIZE):
        path = os.path.join(results, "%d.json" % rank)
        if os.path.exists(path):
            with open(path) as f:
                outcomes[rank] = json.load(f)
    print("--- %s (%s): %s, %.1f s" % (case, comm, "must work" if expected is None else
                                       "must be refused", time.monotonic() - began))
    for rank in range(SIZE):
        o = outcomes.get(rank)
        if o is None:
            print("  rank %d: %s" % (rank, "killed at %d s" % LIMIT_S if rank in stragglers
                                     else "no result"))
        elif o["ok"]:
            print("  rank %d: ok on %s after %.2f s (all_reduce: %s)" %
                  (rank, o["collective"], o["seconds"], o["sum"]))
        else:
            print("  rank %d: failed at %s after %.2f s: %s%s" %
                  (rank, o["step"], o["seconds"], o["error"], o.get("traceback", "")))
    problems = judge(case, expected, outcomes, stragglers)
    for p in problems:
        print("  PROBLEM: " + p)
    sys.stdout.flush()
    return problems


if __name__ == "__main__":
    comm = os.environ.get("CHORUS_COMMUNICATION", "AUTO")
    failed = [case for case in sys.argv[1:] if run_case(case, comm)]
    if failed:
        raise SystemExit("job secret: %s went wrong under %s (PROBLEM lines above)" %
                         (", ".join(failed), comm))
    print("job secret: %s as they should under %s" % (", ".join(sys.argv[1:]), comm))

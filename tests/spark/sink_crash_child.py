"""Run by test_sink_exactly_once / the benchmark as a child process: one commit of a staged batch, to be killed
with SIGKILL at a random moment (or at a named step of the protocol, when one is given)."""
import json
import os
import signal
import sys

from rmq_log import store_commit
from rmq_log.store_commit import commit_batch


def main():
    args = json.loads(sys.argv[1])
    if not args.get("atomic", True):  # the store's plain put_batch: a killed append leaves a prefix behind
        store_commit.supports_atomic = lambda store: False
    at = args.get("kill_at")

    if at == "torn":  # die inside the commitlog write: half the batch's records written, the next one torn
        from store.commit_log import CommitLog

        def torn_write(self, segments, records, sizes, sync):
            half = (len(sizes) - 1) // 2
            data = bytes(records(0, half + 1))[:int(sizes[:half].sum()) + 7]
            first = segments[0]  # the batch starts in one file
            self.files.get_or_create(first.file_from_offset).write(first.position - first.file_from_offset, data)
            os.kill(os.getpid(), signal.SIGKILL)
        CommitLog.write = torn_write

    def step(name):
        if name == at:
            os.kill(os.getpid(), signal.SIGKILL)

    print("ready", flush=True)
    sys.stdin.readline()  # the parent starts its clock, then says go
    out = commit_batch(args["path"], args["sink_dir"], args["sink_id"], args["batch_id"], args["paths"],
                       args["topics"], crash_point=step)
    print(out, flush=True)


if __name__ == "__main__":
    main()

# The entry: the arguments' frame on stdin, then one operation, or (for
# ["--serve", <root>]) the serving process.

import sys
from .base import Refusal
from .operations import failure_line, main
from .frames import read_args, read_start
from .serve import serve


if __name__ == "__main__":
    # sys.argv is ["-c", "workspace"]: the arguments come on stdin.
    try:
        args = read_args(0)
        if args[:1] == ["--serve"] and len(args) == 2:
            serve(args[1], *read_start(0))
        else:
            main(args)
    except (Refusal, OSError) as e:
        sys.stderr.write(failure_line(e))
        sys.exit(1)

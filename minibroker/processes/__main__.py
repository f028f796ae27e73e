"""A broker process: `python -m minibroker.processes FD NODE_ID [LOG_LEVEL]` (the supervisor
starts it, handing over one end of a socketpair as FD)."""
from __future__ import annotations

import asyncio
import logging
import sys

from minibroker.processes.node import child_main


def main() -> None:
    fd, node_id = int(sys.argv[1]), int(sys.argv[2])
    level = sys.argv[3] if len(sys.argv) > 3 else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop
    except ImportError:
        asyncio.run(child_main(fd, node_id))
    else:
        uvloop.run(child_main(fd, node_id))


if __name__ == "__main__":
    main()

"""A voter's election state on disk: KRaft's `quorum-state` file in the metadata log directory.

Raft's safety needs the epoch a voter is in and whom it voted for in that epoch to survive a
restart: a voter that forgot them could vote again in an epoch it voted in, and two leaders be
elected in one epoch. The file is JSON in KRaft's field names, written to a temporary file,
fsynced, renamed over the old one and the directory fsynced, before the voter grants the vote or
acts in the epoch (as KRaft's FileQuorumStateStore).
"""
from __future__ import annotations

import json
import os
from typing import NamedTuple

QUORUM_STATE = "quorum-state"
DATA_VERSION = 1


class ElectionState(NamedTuple):
    epoch: int
    voted_id: int                   # -1: no vote in this epoch
    leader_id: int                  # -1: no leader known in this epoch


class QuorumStateStore:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, QUORUM_STATE)

    def load(self) -> ElectionState | None:
        """The state last written; None if there is none (a voter that never left epoch 0).
        A file that does not parse is an error: guessing an epoch could mean voting twice."""
        try:
            with open(self.path) as f:
                text = f.read()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(text)
            return ElectionState(int(data["leaderEpoch"]), int(data["votedId"]),
                                 int(data["leaderId"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{self.path}: not a quorum-state file ({e})") from None

    def save(self, state: ElectionState) -> None:
        os.makedirs(self.directory, exist_ok=True)
        data = {"leaderId": state.leader_id, "leaderEpoch": state.epoch,
                "votedId": state.voted_id, "data_version": DATA_VERSION}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            f.write(json.dumps(data, sort_keys=True))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)                # the rename itself survives a crash
        finally:
            os.close(fd)

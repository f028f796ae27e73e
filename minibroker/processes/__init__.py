"""`minibroker serve --processes`: one broker per process, so a cluster can use as many cores,
and KRaft's combined mode as it really is: no process is special.

The parent is a supervisor (supervisor.py) and nothing else: it starts brokers 1..N each in its
own process (`python -m minibroker.processes`), tells them over the socketpair each one holds
where the others listen and which are running, and starts again one that died. Each broker
process (node.py) runs a broker and a voter of the metadata quorum with its own copy of the
metadata log (controller/raft.py); the voter the majority elects runs the active controller. The
controller appends each record to its copy, replicates it to the other voters and counts it
committed once a majority holds it. Everything brokers say to each other stays on the wire as
before (the controller's LeaderAndIsr / UpdateMetadata on the control-plane listeners,
authenticated with the SCRAM credentials generated at start; followers' Fetch requests on the
inter-broker listener, with a secured client listener one of the brokers' own authenticated the
same way); the quorum's messages and what a broker asks of the controller (ControllerChannel's
calls, channel.py) go over the processes' direct links (mesh.py, proved with a secret generated
at start), each call to whichever process the quorum elected, and again to the next one on
NOT_CONTROLLER. Nothing passes through the supervisor, so its death stops no broker: they serve
on, without restarts.

When a process dies (SIGKILL included), its links end and the supervisor tells the others: if
it ran the active controller, the other voters elect a new one (without that notice, after
controller.quorum.election.timeout.ms without hearing from it), which replays its copy and fences
the dead broker; else the active controller fences it. Either way its partitions' leadership
moves within their ISRs, so an acks=all write survives. Unless `serve --no-restart`, the
supervisor starts it again under the same node id (after a back-off that doubles while it keeps
dying): with `--data-dir` it loads its logs and its copy of the metadata log, without it comes
back as an empty replica that catches up from the ISR (and a voter that gets the log from the
leader); either way it registers with a new broker epoch and rejoins the ISRs once caught up.
Majority rule throughout: with fewer than a majority of the voters running, no controller is
elected (admin calls wait).
"""
from minibroker.processes.channel import CALLS, RemoteControllerChannel
from minibroker.processes.supervisor import Supervisor, cluster_id_for

__all__ = ["CALLS", "RemoteControllerChannel", "Supervisor", "cluster_id_for"]

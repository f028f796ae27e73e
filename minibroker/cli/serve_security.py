"""`serve`'s security shortcuts: each sets Kafka's configs (docs/security.md), which `--override`
can still set one by one."""
from __future__ import annotations

import os
import secrets

from minibroker.cli.common import fail
from minibroker.security.credentials import parse_user
from minibroker.security.listeners import SECURITY_PROTOCOLS, broker_listeners, primary
from minibroker.security.sasl import MECHANISMS

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def add_security_flags(s) -> None:
    s.add_argument("--security-protocol", default="PLAINTEXT", choices=SECURITY_PROTOCOLS,
                   type=str.upper, help="the client listener's security protocol")
    s.add_argument("--sasl-mechanisms", default=",".join(MECHANISMS), metavar="LIST",
                   help="sasl.enabled.mechanisms (default: all of them)")
    s.add_argument("--user", action="append", default=[], metavar="NAME:PASSWORD",
                   help="a user SASL authenticates: a PLAIN password and SCRAM-SHA-256/512 "
                        "credentials (repeat)")
    s.add_argument("--super-user", action="append", default=[], metavar="NAME",
                   help="super.users: User:NAME may do anything (repeat)")
    s.add_argument("--acls", action="store_true",
                   help="enforce ACLs (StandardAuthorizer, allow.everyone.if.no.acl.found=false)")
    s.add_argument("--tls-dir", default=None, metavar="DIR",
                   help="TLS material: DIR/ca.pem (what clients trust) and the broker's "
                        "certificate, generated when absent (needs the 'security' extra)")


def security_overrides(args) -> dict:
    """The shortcuts as ClusterConfig fields."""
    out: dict = {}
    proto = args.security_protocol
    if proto != "PLAINTEXT":
        out["listeners"] = f"{proto}://{args.host}:{args.port}"
    mechanisms = [m.strip().upper() for m in args.sasl_mechanisms.split(",") if m.strip()]
    unknown = [m for m in mechanisms if m not in MECHANISMS]
    if unknown or not mechanisms:
        fail(f"--sasl-mechanisms: {unknown[0] if unknown else 'none given'} is not one of "
             f"{','.join(MECHANISMS)}")
    out["sasl_enabled_mechanisms"] = ",".join(mechanisms)
    for text in args.user:
        try:
            parse_user(text)
        except ValueError as e:
            fail(f"--user: {e}")
    out["users"] = tuple(args.user)
    if args.processes and args.brokers > 1:
        # The controller authenticates to the other processes' control-plane listeners with
        # this (SASL/SCRAM); it reaches them in their config and is never printed.
        out["minibroker_control_plane_password"] = secrets.token_urlsafe(32)
    if args.super_user:
        out["super_users"] = ";".join(f"User:{name}" for name in args.super_user)
    if args.acls:
        out["authorizer_class_name"] = STANDARD_AUTHORIZER
        out["allow_everyone_if_no_acl_found"] = False
    if args.tls_dir is not None or proto in ("SSL", "SASL_SSL"):
        if args.tls_dir is None:
            fail(f"--security-protocol {proto} needs --tls-dir DIR (a CA and the broker's "
                 "certificate are generated there) or --override ssl.keystore.location=...")
        try:
            from minibroker.security.certs import tls_settings
        except ImportError:
            fail("--tls-dir needs the 'cryptography' package: pip install 'minibroker[security]'")
        try:
            out.update(tls_settings(os.path.abspath(args.tls_dir)))
        except OSError as e:
            fail(f"--tls-dir {args.tls_dir}: {e}")
    return out


# The brokers' own listener with --processes: Kafka's inter.broker.listener.name.
INTER_BROKER_LISTENER = "BROKER"


def inter_broker_overrides(config) -> dict:
    """With --processes: when replication would run on a secured listener, the configs that move
    it to a SASL_PLAINTEXT listener of the brokers' own, which only the cluster user passes
    (SCRAM-SHA-512 with the generated password; broker/listener_security.py). Not the control
    plane: in Kafka that carries the controller's requests only, and followers fetch on the
    inter-broker listener. Not TLS: the processes all run on this host, so the traffic never
    crosses a network, and authentication is what keeps strangers out."""
    try:
        specs = broker_listeners(config, 1)
        inter = primary(config, specs)
    except ValueError as e:
        fail(str(e))
    if inter.security_protocol == "PLAINTEXT":
        return {}
    if config.inter_broker_listener_name:
        fail(f"--processes: inter.broker.listener.name={config.inter_broker_listener_name} is "
             f"a {inter.security_protocol} listener; leave it unset (the brokers then replicate "
             f"over a SASL listener of their own) or name a PLAINTEXT one")
    if any(spec.name == INTER_BROKER_LISTENER for spec in specs):
        fail(f"--processes: the listener name {INTER_BROKER_LISTENER} is the brokers' own "
             "(their inter-broker listener): name yours differently")
    host = f"[{config.host}]" if ":" in config.host else config.host
    return {"listeners": f"{config.listeners},{INTER_BROKER_LISTENER}://{host}:0",
            "listener_security_protocol_map":
                f"{config.listener_security_protocol_map},{INTER_BROKER_LISTENER}:SASL_PLAINTEXT",
            "inter_broker_listener_name": INTER_BROKER_LISTENER}


def ca_line(args) -> str | None:
    """serve's stdout line naming the CA clients trust, after BOOTSTRAP."""
    if args.tls_dir is None:
        return None
    return f"CA {os.path.join(os.path.abspath(args.tls_dir), 'ca.pem')}"

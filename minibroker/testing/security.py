"""Security settings for a test cluster in one call (docs/security.md):

    config = security_config("SASL_SSL", tls_dir=tmp_path, users=["alice:alice-secret"])
    with ThreadedCluster(brokers=1, **config) as c:
        KafkaProducer(bootstrap_servers=c.bootstrap, security_protocol="SASL_SSL",
                      ssl_cafile=c.ca_file, sasl_mechanism="SCRAM-SHA-512", ...)

They are Kafka's configs (ClusterConfig fields), so Cluster, ThreadedCluster and the pytest
plugin's `minibroker_config` fixture take them alike.
"""
from __future__ import annotations

import os

from minibroker.security.listeners import SECURITY_PROTOCOLS
from minibroker.security.sasl import MECHANISMS


def security_config(security_protocol: str = "PLAINTEXT", *, tls_dir: str | os.PathLike | None
                    = None, users=(), mechanisms=MECHANISMS, client_auth: str = "none",
                    host: str = "127.0.0.1", **configs) -> dict:
    """The configs of one client listener of `security_protocol` (a CA and broker certificate
    are generated in `tls_dir` for SSL and SASL_SSL), with `users` ("NAME:PASSWORD"); any other
    ClusterConfig field passes through."""
    if security_protocol not in SECURITY_PROTOCOLS:
        raise ValueError(f"security_protocol {security_protocol!r} is not one of "
                         f"{', '.join(SECURITY_PROTOCOLS)}")
    out = dict(listeners=f"{security_protocol}://{host}:0", users=tuple(users),
               sasl_enabled_mechanisms=",".join(mechanisms))
    if security_protocol in ("SSL", "SASL_SSL") or tls_dir is not None:
        if tls_dir is None:
            raise ValueError(f"{security_protocol} needs tls_dir (the CA is generated there)")
        from minibroker.security.certs import tls_settings     # needs cryptography
        out.update(tls_settings(tls_dir, client_auth))
    out.update(configs)
    return out

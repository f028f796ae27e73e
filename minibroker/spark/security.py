"""kafka.security.protocol and the kafka.ssl.* properties, as an ssl.SSLContext for the client.

PLAINTEXT (the default) and SSL (server certificates checked against kafka.ssl.ca.location or a
PEM kafka.ssl.truststore.location; a client certificate from kafka.ssl.certificate.location and
kafka.ssl.key.location) are honoured with the stdlib ssl module. SASL_PLAINTEXT and SASL_SSL are
refused: the reference client has no SASL, and a job must never fall back to plaintext.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

from minibroker.spark.option_table import OptionError


def ssl_context(opts: dict):
    """The SSLContext `opts` (lower-cased option names) ask for, or None for PLAINTEXT."""
    protocol = (opts.get("kafka.security.protocol") or "PLAINTEXT").strip().upper()
    if protocol.startswith("SASL"):
        raise OptionError(f"kafka.security.protocol={protocol} is not supported: the reference "
                          f"client has no SASL yet (PLAINTEXT and SSL are)")
    if protocol not in ("PLAINTEXT", "SSL"):
        raise OptionError(f"kafka.security.protocol must be PLAINTEXT or SSL, not {protocol!r}")
    ssl_keys = sorted(k for k in opts if k.startswith("kafka.ssl."))
    if protocol == "PLAINTEXT":
        if ssl_keys:
            raise OptionError(f"{', '.join(ssl_keys)} given with security.protocol=PLAINTEXT: "
                              f"set kafka.security.protocol=SSL (or drop them)")
        return None
    store_type = (opts.get("kafka.ssl.truststore.type") or "PEM").upper()
    if store_type != "PEM":
        raise OptionError(f"kafka.ssl.truststore.type={store_type} is not supported: give a PEM "
                          f"file (kafka.ssl.truststore.type=PEM or kafka.ssl.ca.location)")
    cafile = opts.get("kafka.ssl.ca.location") or opts.get("kafka.ssl.truststore.location")
    try:
        ctx = ssl.create_default_context(cafile=cafile or None)
        cert, key = opts.get("kafka.ssl.certificate.location"), opts.get("kafka.ssl.key.location")
        if cert or key:
            if not (cert and key):
                raise OptionError("kafka.ssl.certificate.location and kafka.ssl.key.location "
                                  "go together")
            ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise OptionError(f"security.protocol=SSL: cannot load the certificates: {e}") from e
    algorithm = opts.get("kafka.ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.strip().lower() not in ("", "https"):
        raise OptionError(f"kafka.ssl.endpoint.identification.algorithm must be 'https' or '', "
                          f"not {algorithm!r}")
    if algorithm is not None and not algorithm.strip():
        ctx.check_hostname = False          # Kafka's "" : no host name verification
    return ctx


@dataclass(frozen=True)
class ClientConf:
    """How the connector's clients connect: picklable (it travels to Python workers), the
    SSLContext built where a client starts."""
    bootstrap: str
    request_timeout_ms: int = 30000
    client_id: str = "minibroker-spark"
    security: tuple = ()            # sorted (name, value): kafka.security.protocol, kafka.ssl.*

    def ssl_context(self):
        return ssl_context(dict(self.security))


def client_conf(opts: dict, client_id: str) -> ClientConf:
    """The ClientConf of lower-cased options; bad security settings fail here, on the driver."""
    security = tuple(sorted((k, str(v)) for k, v in opts.items()
                            if k == "kafka.security.protocol" or k.startswith("kafka.ssl.")))
    ssl_context(dict(security))
    timeout = opts.get("kafka.request.timeout.ms")
    return ClientConf(bootstrap=opts["kafka.bootstrap.servers"],
                      request_timeout_ms=_positive(timeout, "kafka.request.timeout.ms", 30000),
                      client_id=opts.get("kafka.client.id") or client_id, security=security)


def _positive(v, name: str, default: int) -> int:
    if v in (None, ""):
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"{name} must be a positive integer, not {v!r}")
    return n

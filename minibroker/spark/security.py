"""kafka.security.protocol and the kafka.ssl.* / kafka.sasl.* properties, checked on the driver
and turned into the reference client's settings (minibroker.client.security) where a client
starts.

PLAINTEXT (the default), SSL, SASL_PLAINTEXT and SASL_SSL: server certificates checked against
kafka.ssl.ca.location or a PEM kafka.ssl.truststore.location, a client certificate from
kafka.ssl.certificate.location and kafka.ssl.key.location; SASL PLAIN, SCRAM-SHA-256/512 or
OAUTHBEARER (an unsecured token: test set-ups) with the credentials of kafka.sasl.jaas.config.
A job never falls back to plaintext, and ssl.* options given with PLAINTEXT are refused rather
than ignored.
"""
from __future__ import annotations

from dataclasses import dataclass

from minibroker.client.security import ClientSecurity, SecurityConfigError, from_properties
from minibroker.spark.option_table import OptionError


def client_security(opts: dict) -> ClientSecurity:
    """The settings `opts` (lower-cased option names) ask for."""
    protocol = (opts.get("kafka.security.protocol") or "PLAINTEXT").strip().upper()
    ssl_keys = sorted(k for k in opts if k.startswith("kafka.ssl."))
    if protocol == "PLAINTEXT" and ssl_keys:
        raise OptionError(f"{', '.join(ssl_keys)} given with security.protocol=PLAINTEXT: "
                          f"set kafka.security.protocol=SSL (or drop them)")
    props = {k[len("kafka."):]: str(v) for k, v in opts.items() if k.startswith("kafka.")}
    try:
        return from_properties(props)
    except SecurityConfigError as e:
        raise OptionError(f"kafka.{e}" if str(e).startswith(("security.", "ssl.", "sasl."))
                          else str(e)) from e


def ssl_context(opts: dict):
    """The SSLContext `opts` ask for, or None for PLAINTEXT / SASL_PLAINTEXT."""
    try:
        return client_security(opts).ssl_context()
    except SecurityConfigError as e:
        raise OptionError(str(e)) from e


@dataclass(frozen=True)
class ClientConf:
    """How the connector's clients connect: picklable (it travels to Python workers), the
    SSLContext built where a client starts."""
    bootstrap: str
    request_timeout_ms: int = 30000
    client_id: str = "minibroker-spark"
    security: tuple = ()    # sorted (name, value): kafka.security.protocol, kafka.ssl.*, kafka.sasl.*

    def client_security(self) -> ClientSecurity:
        return client_security(dict(self.security))


def client_conf(opts: dict, client_id: str) -> ClientConf:
    """The ClientConf of lower-cased options; bad security settings fail here, on the driver."""
    security = tuple(sorted((k, str(v)) for k, v in opts.items()
                            if k == "kafka.security.protocol" or k.startswith(("kafka.ssl.",
                                                                               "kafka.sasl."))))
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

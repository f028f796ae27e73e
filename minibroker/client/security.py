"""A client's security settings by Kafka's property names: `security.protocol`, `ssl.*` and
`sasl.*`, as the Java client (and the tools' --command-config files) and librdkafka name them.

One frozen, picklable value (it travels to Spark's Python workers) that the connection pool
turns into a TLS context and a SASL exchange per connection. PEM files only (Kafka's
`ssl.truststore.type=PEM`); JKS and PKCS12 stores are refused with the reason. SASL: PLAIN,
SCRAM-SHA-256/512 and OAUTHBEARER with an unsecured token (Kafka's test-only login module);
credentials from `sasl.jaas.config` (Java) or `sasl.username` / `sasl.password` (librdkafka).
A setting that cannot be honoured is an error, never a silent fall back to plaintext.
"""
from __future__ import annotations

import re
import ssl
from dataclasses import dataclass

from minibroker.network.sasl_client import MECHANISMS, authenticate

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+?))\s*(?=;|\s|$)')


class SecurityConfigError(ValueError):
    """A security property that is malformed or that the reference client cannot honour."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    cafile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    username: str = ""
    password: str = ""

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        try:
            ctx = ssl.create_default_context(cafile=self.cafile)
            if self.certfile:
                ctx.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        except (OSError, ssl.SSLError) as e:
            raise SecurityConfigError(f"security.protocol={self.protocol}: cannot load the "
                                      f"certificates: {e}") from e
        ctx.check_hostname = self.check_hostname
        return ctx

    async def authenticate(self, conn) -> int:
        """SASL on a connection that has exchanged ApiVersions (a no-op without SASL); returns
        the session lifetime the broker gave (ms; 0: none, KIP-368)."""
        if not self.sasl:
            return 0
        return await authenticate(conn, self.mechanism or "", self.username, self.password)


def from_properties(props: dict[str, str]) -> ClientSecurity:
    """The settings of a Kafka client's properties (other keys are not looked at)."""
    protocol = (props.get("security.protocol") or "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise SecurityConfigError(f"security.protocol must be one of {', '.join(PROTOCOLS)}, "
                                  f"not {protocol!r}")
    fields: dict = {"protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        fields.update(_tls(props))
    if protocol.startswith("SASL_"):
        fields.update(_sasl(props))
    return ClientSecurity(**fields)


def _pem(props: dict[str, str], kind: str) -> None:
    store = (props.get(f"ssl.{kind}.type") or "PEM").strip().upper()
    if store != "PEM":
        raise SecurityConfigError(f"ssl.{kind}.type={store} is not supported: give PEM files "
                                  f"(ssl.{kind}.type=PEM)")


def _tls(props: dict[str, str]) -> dict:
    _pem(props, "truststore")
    _pem(props, "keystore")
    cert = props.get("ssl.certificate.location") or props.get("ssl.keystore.location")
    key = props.get("ssl.key.location")     # a PEM keystore holds the key beside the certificate
    if key and not cert:
        raise SecurityConfigError("ssl.key.location needs ssl.certificate.location")
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("", "https", "none"):
        raise SecurityConfigError(f"ssl.endpoint.identification.algorithm must be 'https' or '', "
                                  f"not {algorithm!r}")
    return {"cafile": props.get("ssl.ca.location") or props.get("ssl.truststore.location") or None,
            "certfile": cert or None, "keyfile": key or None,
            "key_password": props.get("ssl.key.password") or props.get("ssl.keystore.password")
            or None,
            "check_hostname": algorithm == "https"}


def _sasl(props: dict[str, str]) -> dict:
    mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").strip()
    if mechanism.upper() not in MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism={mechanism} is not supported: set one of "
                                  f"{', '.join(MECHANISMS)}")
    mechanism = mechanism.upper()
    user, password = props.get("sasl.username", ""), props.get("sasl.password", "")
    jaas = props.get("sasl.jaas.config")
    if jaas:
        options = {m.group(1): re.sub(r"\\(.)", r"\1", m.group(2)) if m.group(2) is not None
                   else m.group(3) for m in _JAAS_OPTION.finditer(jaas)}
        user = options.get("username", options.get("unsecuredLoginStringClaim_sub", user))
        password = options.get("password", password)
    if not user:
        raise SecurityConfigError(f"sasl.mechanism={mechanism} needs a user: sasl.jaas.config "
                                  f"(username=\"...\" password=\"...\") or sasl.username")
    if mechanism != "OAUTHBEARER" and not password:
        raise SecurityConfigError(f"sasl.mechanism={mechanism} needs a password for {user!r}")
    return {"mechanism": mechanism, "username": user, "password": password}

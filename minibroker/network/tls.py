"""TLS for SSL and SASL_SSL listeners, with the standard library's `ssl` (Kafka's ssl.* configs,
PEM files), and the client certificate's subject as the principal.

`ssl.principal.mapping.rules` (KIP-371) are Kafka's: a comma-separated list of
`RULE:pattern/replacement/[LU]` tried in order on the subject as Kafka formats it (RFC 2253,
most specific first: `CN=alice,O=test`), and `DEFAULT` (the whole subject). No rule matching
is a failed authentication (Kafka: "No rules apply to <dn>, rules [...]").
"""
from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from minibroker.security.principal import ANONYMOUS, KafkaPrincipal

log = logging.getLogger("minibroker.network.tls")

_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL,
                "none": ssl.CERT_NONE}
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
# Java's X500Principal.RFC2253 keywords; other attributes are written as their OID.
_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L",
             "stateOrProvinceName": "ST", "organizationName": "O",
             "organizationalUnitName": "OU", "streetAddress": "STREET",
             "domainComponent": "DC", "userId": "UID"}


class TlsConfigError(ValueError):
    """A listener's ssl.* configs cannot make a server context."""


def server_context(cfg: Any) -> ssl.SSLContext:
    """From a ClusterConfig's ssl.* fields (PEM keystore and truststore)."""
    if not cfg.ssl_keystore_location:
        raise TlsConfigError("an SSL or SASL_SSL listener needs ssl.keystore.location "
                             "(a PEM file with the private key and its certificate chain)")
    for name in ("ssl_keystore_type", "ssl_truststore_type"):
        if getattr(cfg, name).upper() != "PEM":
            raise TlsConfigError(f"{name.replace('_', '.')}={getattr(cfg, name)}: only PEM is "
                                 "supported")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [_PROTOCOLS[p.strip()] for p in cfg.ssl_enabled_protocols.split(",")
                if p.strip() in _PROTOCOLS]
    if not versions:
        raise TlsConfigError(f"ssl.enabled.protocols={cfg.ssl_enabled_protocols}: none of "
                             f"{', '.join(_PROTOCOLS)}")
    ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    password = cfg.ssl_key_password or cfg.ssl_keystore_password or None
    try:
        ctx.load_cert_chain(cfg.ssl_keystore_location, password=password)
        if cfg.ssl_truststore_location:
            ctx.load_verify_locations(cafile=cfg.ssl_truststore_location)
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"cannot load the broker's keystore or truststore: {e}") from None
    ctx.verify_mode = _CLIENT_AUTH[cfg.ssl_client_auth]
    if ctx.verify_mode != ssl.CERT_NONE and not cfg.ssl_truststore_location:
        raise TlsConfigError(f"ssl.client.auth={cfg.ssl_client_auth} needs "
                             "ssl.truststore.location (the CA that signs client certificates)")
    return ctx


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def rfc2253(subject: Sequence[Iterable[tuple[str, str]]]) -> str:
    """getpeercert()'s subject (RDNs in certificate order) as Java's X500Principal.getName()."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None     # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        # Java's $1 group references.
        out = re.sub(r"\$(\d+)", lambda g: m.group(int(g.group(1))) or "", self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


_RULE = re.compile(r"\s*(DEFAULT|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?))\s*(,|$)")


def parse_mapping_rules(text: str) -> tuple[_Rule, ...]:
    rules, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise TlsConfigError(f"Invalid rule: {text[pos:]}")
        if m.group(1) == "DEFAULT":
            rules.append(_Rule(None))
        else:
            rules.append(_Rule(re.compile(m.group(2)), m.group(4), m.group(6)))
        pos = m.end()
    return tuple(rules) or (_Rule(None),)


class PeerPrincipal:
    """A TLS listener's connection -> its principal: the mapped subject of the client's
    certificate, else ANONYMOUS (no certificate, with ssl.client.auth=requested or none)."""

    def __init__(self, mapping_rules: str) -> None:
        self.rules = parse_mapping_rules(mapping_rules)
        self.text = mapping_rules

    def __call__(self, transport: Any) -> KafkaPrincipal:
        sslobj = transport.get_extra_info("ssl_object")
        cert = sslobj.getpeercert() if sslobj is not None else None
        if not cert:
            return ANONYMOUS
        dn = rfc2253(cert.get("subject", ()))
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return KafkaPrincipal("User", name)
        raise TlsConfigError(f"No rules apply to {dn}, rules [{self.text}]")

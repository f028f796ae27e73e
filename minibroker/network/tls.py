"""TLS for SSL and SASL_SSL listeners, with the standard library's `ssl` (Kafka's ssl.* configs,
PEM files), and the client certificate's subject as the principal.

`ssl.principal.mapping.rules` (KIP-371) are Kafka's: a comma-separated list of
`RULE:pattern/replacement/[LU]` tried in order on the subject as Kafka formats it (RFC 2253,
most specific first: `CN=alice,O=test`), and `DEFAULT` (the whole subject). No rule matching
is a failed authentication (Kafka: "No rules apply to <dn>, rules [...]").
"""
from __future__ import annotations

import ctypes
import logging
import re
import ssl
import sys
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
    tuned = tune(ctx)
    if cfg.ssl_cipher_suites.strip():
        set_cipher_suites(ctx, cfg.ssl_cipher_suites, tuned)
    ctx.verify_mode = _CLIENT_AUTH[cfg.ssl_client_auth]
    if ctx.verify_mode != ssl.CERT_NONE and not cfg.ssl_truststore_location:
        raise TlsConfigError(f"ssl.client.auth={cfg.ssl_client_auth} needs "
                             "ssl.truststore.location (the CA that signs client certificates)")
    return ctx


# TLS 1.3 suites, AES-128-GCM first: with AES-NI it is the cheapest (openssl speed: ~1.3x
# AES-256-GCM's rate, ~1.5x ChaCha20's); OpenSSL's default puts AES-256-GCM first.
TLS13_SUITES = b"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
_SSL_CTRL_SET_READ_AHEAD, _SSL_CTRL_GET_READ_AHEAD = 41, 40


def _libssl_ctx(ctx: ssl.SSLContext) -> tuple[ctypes.CDLL, int] | None:
    """(libssl, SSL_CTX*) of a context, or None: what Python's ssl module does not expose is
    reached through OpenSSL's C API. CPython's SSLContext object begins with PyObject_HEAD then
    the SSL_CTX pointer; SSL_CTX_get_options() through it must agree with `ctx.options` before
    anything is set."""
    if sys.implementation.name != "cpython":
        return None
    try:
        # The _ssl extension's handle: its symbols and libssl's, already loaded.
        lib = ctypes.CDLL(getattr(ssl, "_ssl").__file__)
        lib.SSL_CTX_get_options.restype = ctypes.c_uint64
        lib.SSL_CTX_get_options.argtypes = (ctypes.c_void_p,)
        lib.SSL_CTX_ctrl.restype = ctypes.c_long
        lib.SSL_CTX_ctrl.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_long,
                                     ctypes.c_void_p)
        lib.SSL_CTX_set_ciphersuites.argtypes = (ctypes.c_void_p, ctypes.c_char_p)
        lib.OPENSSL_cipher_name.restype = ctypes.c_char_p
        lib.OPENSSL_cipher_name.argtypes = (ctypes.c_char_p,)
    except (OSError, AttributeError):
        return None
    ptr = ctypes.c_void_p.from_address(id(ctx) + object.__basicsize__).value
    if not ptr or lib.SSL_CTX_get_options(ptr) != ctx.options:
        return None
    return lib, ptr


def tune(ctx: ssl.SSLContext) -> bool:
    """Read-ahead (one recv() per record rather than two: header, then body) and AES-128-GCM
    first for TLS 1.3. Whether it could be done: without it connections work the same, at a
    higher cost. OpenSSL's read buffer keeps its default size (one record): it moves what it has
    read ahead to the buffer's front before each record (to align the payload), so a 256 KiB
    buffer moved ~8x the bytes received (a third of the broker's CPU producing over TLS)."""
    found = _libssl_ctx(ctx)
    if found is None:
        log.info("TLS: OpenSSL's read-ahead is not reachable here; TLS costs more CPU")
        return False
    lib, ptr = found
    lib.SSL_CTX_ctrl(ptr, _SSL_CTRL_SET_READ_AHEAD, 1, None)
    lib.SSL_CTX_set_ciphersuites(ptr, TLS13_SUITES)
    return bool(lib.SSL_CTX_ctrl(ptr, _SSL_CTRL_GET_READ_AHEAD, 0, None) == 1)


TLS13_NAMES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                         "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                         "TLS_AES_128_CCM_8_SHA256"})


def set_cipher_suites(ctx: ssl.SSLContext, suites: str, tuned: bool) -> None:
    """Kafka's ssl.cipher.suites: only these (IANA names), for TLS 1.3 and TLS 1.2 alike. A
    protocol left without a suite is disabled, as in Java; none left at all is refused."""
    names = [n.strip() for n in suites.split(",") if n.strip()]
    tls13 = [n for n in names if n in TLS13_NAMES]
    found = _libssl_ctx(ctx) if tuned else None
    if found is None:
        raise TlsConfigError(f"ssl.cipher.suites={suites}: this Python's ssl module cannot set "
                             "TLS 1.3 suites")
    lib, ptr = found
    tls12 = []
    for name in names:
        if name not in TLS13_NAMES:
            openssl = lib.OPENSSL_cipher_name(name.encode()).decode()
            if openssl == "(NONE)":
                raise TlsConfigError(f"ssl.cipher.suites: unknown cipher suite {name}")
            tls12.append(openssl)
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError as e:
            raise TlsConfigError(f"ssl.cipher.suites={suites}: {e}") from None
    lib.SSL_CTX_set_ciphersuites(ptr, ":".join(tls13).encode())
    lo = ssl.TLSVersion.TLSv1_2 if tls12 else ssl.TLSVersion.TLSv1_3
    hi = ssl.TLSVersion.TLSv1_3 if tls13 else ssl.TLSVersion.TLSv1_2
    lo, hi = max(lo, ctx.minimum_version), min(hi, ctx.maximum_version)
    if lo > hi:
        raise TlsConfigError(f"ssl.cipher.suites={suites}: no suite for ssl.enabled.protocols")
    ctx.minimum_version, ctx.maximum_version = lo, hi


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

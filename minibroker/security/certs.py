"""A throwaway CA and certificates for local TLS (`serve --tls-dir`, tests), with `cryptography`.

`ensure_tls_dir(d)` creates, when absent, `ca.pem` (what clients trust), `ca-key.pem`, and
`broker.pem` (the broker's private key and certificate for 127.0.0.1/localhost, one PEM file:
ssl.keystore.location). `client_certificate(d, "CN=alice,O=test")` issues a client certificate
signed by the same CA (for ssl.client.auth). Nothing here is for production: keys are written
unencrypted, readable only by their owner.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825
_ATTRS = {"CN": NameOID.COMMON_NAME, "O": NameOID.ORGANIZATION_NAME,
          "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "C": NameOID.COUNTRY_NAME,
          "L": NameOID.LOCALITY_NAME, "ST": NameOID.STATE_OR_PROVINCE_NAME}


def _name(dn: str) -> x509.Name:
    """'CN=alice,O=test' (most specific first, as Kafka prints it) -> an x509 Name."""
    rdns = []
    for part in dn.split(","):
        key, _, value = part.strip().partition("=")
        rdns.append(x509.NameAttribute(_ATTRS[key.upper()], value))
    return x509.Name(list(reversed(rdns)))


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _issue(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool,
           sans=(), usage=None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False,
                                          False), critical=True)
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _load_ca(d: Path):
    cert = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    key = serialization.load_pem_private_key((d / "ca-key.pem").read_bytes(), None)
    return cert, key


def ensure_tls_dir(directory: str | os.PathLike) -> Path:
    """Create the CA and the broker's certificate in `directory` unless already there; returns
    the CA's path (ca.pem)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "ca.pem").exists() or not (d / "ca-key.pem").exists():
        key = ec.generate_private_key(ec.SECP256R1())
        name = _name("CN=minibroker test CA,O=minibroker")
        cert = _issue(name, key, name, key, ca=True)
        _write(d / "ca-key.pem", _key_pem(key), private=True)
        _write(d / "ca.pem", cert.public_bytes(serialization.Encoding.PEM))
        (d / "broker.pem").unlink(missing_ok=True)      # signed by a CA that is gone
    if not (d / "broker.pem").exists():
        ca_cert, ca_key = _load_ca(d)
        key = ec.generate_private_key(ec.SECP256R1())
        sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address("::1"))]
        cert = _issue(_name("CN=localhost,O=minibroker"), key, ca_cert.subject, ca_key,
                      ca=False, sans=sans, usage=[ExtendedKeyUsageOID.SERVER_AUTH])
        _write(d / "broker.pem", _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM),
               private=True)
    return d / "ca.pem"


def client_certificate(directory: str | os.PathLike, dn: str, name: str = "client"
                       ) -> tuple[Path, Path]:
    """Issue `<name>.pem` (certificate) and `<name>-key.pem` for subject `dn`, signed by the
    directory's CA; returns (certificate, key) paths."""
    d = Path(directory)
    ensure_tls_dir(d)
    ca_cert, ca_key = _load_ca(d)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _issue(_name(dn), key, ca_cert.subject, ca_key, ca=False,
                  usage=[ExtendedKeyUsageOID.CLIENT_AUTH])
    cert_path, key_path = d / f"{name}.pem", d / f"{name}-key.pem"
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _key_pem(key), private=True)
    return cert_path, key_path


def tls_settings(directory: str | os.PathLike, client_auth: str = "none") -> dict:
    """The ssl.* ClusterConfig fields for a broker serving from `directory`."""
    d = Path(directory)
    ensure_tls_dir(d)
    return dict(ssl_keystore_location=str(d / "broker.pem"),
                ssl_truststore_location=str(d / "ca.pem"), ssl_client_auth=client_auth)

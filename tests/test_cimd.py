"""Client ID metadata documents: the official Python SDK's client_metadata_url flow against the demo.

The client's document is served over HTTPS on a local port with a certificate made here. The
toolkit's fetcher refuses loopback addresses (server-side request forgery) and trusts only the
system's certificate authorities, so the test lets it reach 127.0.0.1 and trust the test's
certificate; one test shows the refusal without that allowance.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx
import httpx2
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientMetadata
from oauth2_provider import cimd
from oauth2_provider.models import Application

from tests.conftest import MODERN, mcp_settings
from tests.test_authserver import _asks
from tests.test_oauth import Memory, Person, _signed_in

pytestmark = pytest.mark.django_db(transaction=True)

REDIRECT = "http://127.0.0.1:9/callback"


def _certificate(directory: Path) -> tuple[Path, Path, bytes]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(pem)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path, pem


class ClientSite:
    """The client's own HTTPS site, serving its metadata document (and counting the fetches)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="mcp-cimd-"))
        cert, key, self.pem = _certificate(self.tmp)
        self.fetches = 0
        site = self

        class Serve(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.fetches += 1
                body = json.dumps(site.document).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("cache-control", "max-age=600")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Serve)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.url = f"https://localhost:{self.http.server_address[1]}/mcp-client.json"
        self.document: dict[str, Any] = {
            "client_id": self.url,
            "client_name": "CIMD test client",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        threading.Thread(target=self.http.serve_forever, daemon=True).start()


@pytest.fixture
def site(monkeypatch: pytest.MonkeyPatch) -> Iterator[ClientSite]:
    found = ClientSite()
    made = ssl.create_default_context

    def trusting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        context = made(*args, **kwargs)
        context.load_verify_locations(cadata=found.pem.decode())
        return context

    # The toolkit's fetcher builds its context with ssl.create_default_context().
    monkeypatch.setattr(ssl, "create_default_context", trusting)
    yield found
    found.http.shutdown()


@pytest.fixture
def loopback_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests only: the fetcher may reach 127.0.0.1 (anywhere else, a non-public address is refused)."""
    public = cimd._ip_is_public
    monkeypatch.setattr(cimd, "_ip_is_public", lambda ip: ip == "127.0.0.1" or public(ip))


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", MODERN])
async def test_the_sdk_client_signs_in_with_its_metadata_url(
    live_url: str, site: ClientSite, loopback_allowed: None, mode: str
) -> None:
    person = Person(await anyio.to_thread.run_sync(_signed_in, "cleo"))
    storage = Memory()
    metadata = OAuthClientMetadata(
        client_name="CIMD test client",
        redirect_uris=[REDIRECT],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope="mcp",
    )
    auth = OAuthClientProvider(
        live_url,
        metadata,
        storage,
        redirect_handler=person.open,
        callback_handler=person.callback,
        client_metadata_url=site.url,
    )
    with mcp_settings(ALLOW_ANONYMOUS=False):
        async with httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=60)) as http:
            who, cleared, asked = await _asks(live_url, http, mode)
    assert who.structured_content["username"] == "cleo"
    assert cleared.content[0].text == "Cleared the us cache." and asked == ["Clear the us cache?"]
    # No registration: the client's id is its document's URL, which the server fetched.
    assert storage.client is not None and storage.client.client_id == site.url
    assert person.consents[0]["client_id"] == [site.url]
    app = await Application.objects.aget(client_id=site.url)
    assert app.redirect_uris == REDIRECT and app.name == "CIMD test client"
    # Cached by the document's Cache-Control: one fetch for the whole flow.
    assert site.fetches == 1


def _authorize(live_url: str, client_id: str, redirect_uri: str, cookie: str) -> httpx.Response:
    origin = live_url.rsplit("/mcp", 1)[0]
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "scope": "mcp",
        "code_challenge": "x" * 43,
        "code_challenge_method": "S256",
        "resource": live_url,
    }
    return httpx.get(f"{origin}/o/authorize/?{urlencode(query)}", cookies={"sessionid": cookie}, timeout=30)


def test_a_redirect_uri_the_document_does_not_list_is_refused(
    live_url: str, site: ClientSite, loopback_allowed: None
) -> None:
    cookie = _signed_in("dex")
    assert _authorize(live_url, site.url, REDIRECT, cookie).status_code == 200  # the consent screen
    refused = _authorize(live_url, site.url, "http://127.0.0.1:9/elsewhere", cookie)
    assert refused.status_code == 400 and "location" not in refused.headers


def test_a_document_on_a_loopback_address_is_not_fetched(live_url: str, site: ClientSite) -> None:
    cookie = _signed_in("fay")
    refused = _authorize(live_url, site.url, REDIRECT, cookie)
    assert refused.status_code == 400 and "location" not in refused.headers
    assert site.fetches == 0
    assert not Application.objects.filter(client_id=site.url).exists()

"""Issue 12 item 8: an IPv6 address is judged by every IPv4 address it embeds (the whole class, not a list)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.domain.network_policy import METADATA_ADDRESSES, address_refusal, embedded_ipv4

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address


def _v6(value: int) -> str:
    return str(V6(value))


def _rfc6052(prefix: int, prefix_len: int, v4: V4) -> str:
    """Embed v4 after a prefix per RFC 6052 section 2.2 (the u octet, bits 64-71, stays zero)."""
    bits = int(v4)
    if prefix_len == 96:
        return _v6(prefix | bits)
    raw = bytearray(prefix.to_bytes(16, "big"))
    start = prefix_len // 8
    positions = [p for p in range(16) if p != 8][start : start + 4]
    for i, p in enumerate(positions):
        raw[p] = (bits >> (24 - 8 * i)) & 0xFF
    return _v6(int.from_bytes(raw, "big"))


def embeddings(v4: V4) -> list[str]:
    """Every form of the issue's class that carries v4."""
    n = int(v4)
    forms = [
        _v6(0xFFFF << 32 | n),  # IPv4-mapped ::ffff:a.b.c.d
        _v6(0xFFFF << 48 | n),  # IPv4-translated ::ffff:0:a.b.c.d
        _v6(0x0064_FF9B << 96 | n),  # NAT64 well-known 64:ff9b::a.b.c.d
        _v6(0x2002 << 112 | n << 80),  # 6to4 2002:aabb:ccdd::
    ]
    if n > 1:  # IPv4-compatible ::a.b.c.d (:: and ::1 are the unspecified and loopback addresses themselves)
        forms.append(_v6(n))
    local = 0x0064_FF9B_0001 << 80
    forms += [_rfc6052(local, length, v4) for length in (48, 56, 64, 96)]  # local-use NAT64, RFC 8215
    # Teredo: client address obfuscated (xor) in the last 32 bits; the server address in bits 32-63.
    forms.append(_v6(0x2001_0000 << 96 | int(V4("8.8.8.8")) << 64 | (n ^ 0xFFFFFFFF)))
    forms.append(_v6(0x2001_0000 << 96 | n << 64 | (int(V4("8.8.8.8")) ^ 0xFFFFFFFF)))
    return forms


non_public_v4 = st.one_of(
    st.ip_addresses(v=4, network="127.0.0.0/8"),
    st.ip_addresses(v=4, network="10.0.0.0/8"),
    st.ip_addresses(v=4, network="172.16.0.0/12"),
    st.ip_addresses(v=4, network="192.168.0.0/16"),
    st.ip_addresses(v=4, network="169.254.0.0/16"),
    st.ip_addresses(v=4, network="100.64.0.0/10"),
    st.ip_addresses(v=4, network="0.0.0.0/8"),
    st.ip_addresses(v=4, network="224.0.0.0/4"),
    st.ip_addresses(v=4, network="240.0.0.0/4"),
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(non_public_v4)
def test_every_embedding_of_a_non_public_ipv4_is_refused(v4: V4) -> None:
    assert address_refusal(str(v4), allow_private=False) is not None
    for form in embeddings(v4):
        assert address_refusal(form, allow_private=False) is not None, (str(v4), form)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.ip_addresses(v=4).filter(lambda a: a.is_global and not a.is_multicast and a not in METADATA_ADDRESSES))
def test_embedding_a_public_ipv4_is_judged_by_that_address(v4: V4) -> None:
    """Mapped, translated and well-known NAT64 forms of a public address stay usable (DNS64 networks)."""
    n = int(v4)
    for form in (_v6(0xFFFF << 32 | n), _v6(0xFFFF << 48 | n), _v6(0x0064_FF9B << 96 | n)):
        assert v4 in embedded_ipv4(V6(form))
        assert address_refusal(form, allow_private=False) is None, form


@pytest.mark.parametrize("meta", sorted(str(a) for a in METADATA_ADDRESSES if a.version == 4))
def test_metadata_addresses_are_refused_in_every_form_even_when_private_is_allowed(meta: str) -> None:
    for form in [meta, *embeddings(V4(meta))]:
        reason = address_refusal(form, allow_private=True)
        assert reason is not None and "metadata" in reason, form


@pytest.mark.parametrize(
    "text",
    [
        "::127.0.0.1",
        "::7f00:1",
        "::10.0.0.1",
        "::ffff:0:127.0.0.1",
        "64:ff9b:1::127.0.0.1",
        "fec0::1",
        "fec0:1234::5",
        "64:ff9b:1::",  # local-use NAT64 is never public, whatever it carries
    ],
)
def test_the_issue_addresses_are_refused(text: str) -> None:
    assert address_refusal(text, allow_private=False) is not None


@pytest.mark.parametrize("text", ["::169.254.169.254", "::ffff:0:169.254.169.254", "64:ff9b:1::a9fe:a9fe"])
def test_the_issue_metadata_forms_are_refused_with_the_flag(text: str) -> None:
    assert "metadata" in (address_refusal(text, allow_private=True) or "")

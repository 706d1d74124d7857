"""Which addresses an outbound call made on a caller's behalf may reach (webhooks, later connector base URLs).

An IPv6 address is judged together with every IPv4 address it may carry, because a translator, a 6to4
relay or an old dual stack turns it into that IPv4 address on the wire:

* IPv4-mapped `::ffff:0:0/96` and IPv4-compatible `::/96` (RFC 4291),
* IPv4-translated `::ffff:0:0:0/96` (RFC 6145),
* NAT64: the well-known `64:ff9b::/96` (RFC 6052) and the local-use `64:ff9b:1::/48` (RFC 8215), where
  the operator picks the prefix length, so every RFC 6052 position (/32 … /96) is tried,
* 6to4 `2002::/16` (RFC 3056) and Teredo `2001::/32` (RFC 4380, server and de-obfuscated client).

The address is refused when any candidate is refused. Site-local `fec0::/10` (deprecated, but routed as
private where still configured) and the local-use NAT64 range are never public. Cloud metadata addresses
are refused in every form, whatever `allow_private` says.
"""

from __future__ import annotations

import ipaddress

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_COMPATIBLE = ipaddress.ip_network("::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_SITE_LOCAL = ipaddress.ip_network("fec0::/10")
# RFC 6052 section 2.2: where the 32 bits sit for each prefix length; bits 64-71 (the "u" octet) are skipped.
_RFC6052_LENGTHS = (32, 40, 48, 56, 64, 96)


def _rfc6052_extract(addr: ipaddress.IPv6Address, prefix_len: int) -> ipaddress.IPv4Address:
    raw = addr.packed
    if prefix_len == 96:
        v4 = raw[12:16]
    else:
        start = prefix_len // 8
        without_u = raw[:8] + raw[9:]  # drop the u octet (byte 8)
        v4 = without_u[start : start + 4]
    return ipaddress.IPv4Address(v4)


def embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address `addr` may stand for on the wire (empty for a plain IPv6 address)."""
    found: list[ipaddress.IPv4Address] = []
    if addr.ipv4_mapped is not None:
        found.append(addr.ipv4_mapped)
    if addr in _COMPATIBLE or addr in _TRANSLATED or addr in _NAT64_WELL_KNOWN:
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    if addr in _NAT64_LOCAL:
        found += [_rfc6052_extract(addr, n) for n in _RFC6052_LENGTHS if n >= 48]
    if addr.sixtofour is not None:
        found.append(addr.sixtofour)
    if addr.teredo is not None:
        found += list(addr.teredo)
    return found


def _own_refusal(a: IpAddress) -> str | None:
    """Why this one address is not public, or None."""
    if a.is_loopback:
        return f"{a} is a loopback address"
    if a.is_link_local:
        return f"{a} is a link-local address"
    if a.is_multicast:
        return f"{a} is a multicast address"
    if a.is_unspecified:
        return f"{a} is the unspecified address"
    if isinstance(a, ipaddress.IPv4Address) and a in _CGNAT:
        return f"{a} is a shared (CGNAT) address"
    if isinstance(a, ipaddress.IPv6Address) and a in _SITE_LOCAL:
        return f"{a} is a site-local address"
    if isinstance(a, ipaddress.IPv6Address) and a in _NAT64_LOCAL:
        return f"{a} is in the local-use NAT64 range"
    if a.is_private:
        return f"{a} is a private address"
    if not a.is_global:
        return f"{a} is not a public address"
    return None


def address_refusal(ip_text: str, *, allow_private: bool) -> str | None:
    """Why an outbound call may not connect to this address, or None if it may."""
    try:
        addr: IpAddress = ipaddress.ip_address(ip_text.split("%", 1)[0])
    except ValueError:
        return f"'{ip_text}' is not an IP address"
    candidates: list[IpAddress] = [addr]
    if isinstance(addr, ipaddress.IPv6Address):
        candidates += embedded_ipv4(addr)
    for a in candidates:
        if a in METADATA_ADDRESSES:
            return f"{addr} is a cloud metadata address" + ("" if a == addr else f" ({a} embedded)")
    if allow_private:
        return None
    for a in candidates:
        reason = _own_refusal(a)
        if reason is not None:
            return reason if a == addr else f"{addr} embeds {a}: {reason}"
    return None

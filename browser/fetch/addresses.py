"""Which addresses the fetcher may connect to, and a name lookup that checks every answer.

A name is resolved once, here, and the fetcher connects to an address returned by ``resolve`` (never to
the name again), so a DNS answer that changes between the check and the connection (rebinding) cannot
slip through. Resolving also normalises the odd IPv4 spellings that defeat string checks: glibc reads
"2130706433", "0x7f.1" and "0177.0.0.1" the way inet_aton does, as 127.0.0.1, and that is what we check.
Every address of a name must pass, not just the first: a name with one public and one private record is
refused, because the connection could go to either.
"""

from __future__ import annotations

import ipaddress
import socket

from browser.fetch.refusals import FetchRefused

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Cloud metadata and host-agent endpoints, refused even where loopback is allowed for tests. Most lie in
# ranges refused anyway (link-local, private, shared); Azure's wireserver 168.63.129.16 is a public
# address and has to be named.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200", "168.63.129.16")
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address that 6to4 and Teredo addresses carry (they route to it)."""
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def address_problem(ip: IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` may not be fetched ("loopback", "private", ...), or None when it may."""
    if ip in METADATA:
        return "cloud metadata"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            # ::ffff:a.b.c.d is a.b.c.d on a dual-stack socket; judge the IPv4 address alone.
            return address_problem(ip.ipv4_mapped, allow_loopback=allow_loopback)
        if ip in NAT64:
            # DNS64 answers for IPv4-only sites: the NAT64 gateway connects to the embedded address.
            return address_problem(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), allow_loopback=allow_loopback)
        inner = _embedded_ipv4(ip)
        if inner is not None and (problem := address_problem(inner, allow_loopback=allow_loopback)):
            return problem
    if ip.is_unspecified:
        # 0.0.0.0 and :: reach the local host on Linux.
        return "unspecified"
    if ip.is_loopback:
        return None if allow_loopback else "loopback"
    if ip.is_link_local:
        return "link-local"
    # Multicast is checked before "global": ipaddress counts 224.0.0.0/4 as global.
    if ip.is_multicast:
        return "multicast"
    if ip.is_private:
        return "private"
    if ip.is_reserved or not ip.is_global:
        return "reserved"
    return None


# What an operator's own service (a self-hosted SearXNG) may be: on this machine or the private network.
INTERNAL = frozenset({"loopback", "private", "reserved"})


def resolve(host: str, port: int, *, allow_loopback: bool = False, internal: bool = False) -> tuple[str, ...]:
    """The addresses of ``host`` to connect to, all checked; FetchRefused if any is not allowed.
    ``internal``: the host is one the operator configured (never a name from a page or a person), so
    loopback and private addresses pass; metadata, link-local, multicast and unspecified ones still don't."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchRefused("name_not_resolved", f"The name {host} could not be found.") from exc
    addresses: list[str] = []
    for family, _type, _proto, _name, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        ip = ipaddress.ip_address(sockaddr[0])
        problem = address_problem(ip, allow_loopback=allow_loopback)
        if problem in INTERNAL and internal:
            problem = None
        if problem:
            # The message names the kind of address, not the address: no map of internal DNS for callers.
            raise FetchRefused(
                "address_not_allowed", f"This address is not allowed ({host}: {problem} address)."
            )
        if str(ip) not in addresses:
            addresses.append(str(ip))
    if not addresses:
        raise FetchRefused("name_not_resolved", f"The name {host} has no internet address.")
    return tuple(addresses)

//! What counts as this machine, decided once: the API's bind address, peer and `Host` checks,
//! the MCP face's HTTP listener, the desktop client's API URL, the model URL rule and the
//! connector's doctor all ask here.

use std::net::{IpAddr, Ipv4Addr};

/// The address `host` names when it names this machine: `localhost` in any case (as
/// 127.0.0.1) or a loopback IP literal (`127.0.0.0/8`, `::1`, brackets allowed); `None` for
/// anything else. Only the decimal dotted quad is an IPv4 literal: the octal and hex forms some
/// URL parsers turn into other addresses are not.
#[must_use]
pub fn loopback_ip(host: &str) -> Option<IpAddr> {
    if host.eq_ignore_ascii_case("localhost") {
        return Some(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .ok()
        .filter(IpAddr::is_loopback)
}

/// Whether `host` names this machine (see [`loopback_ip`]).
#[must_use]
pub fn is_loopback_host(host: &str) -> bool {
    loopback_ip(host).is_some()
}

/// Whether a connection's peer is on this machine: a loopback address, including an IPv4
/// loopback peer that a dual-stack socket reports as IPv4-mapped IPv6.
#[must_use]
pub fn is_loopback_peer(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether a `Host` value (an authority, parsed as a URL's: userinfo dropped, brackets kept for
/// IPv6, port ignored, any case) names this machine by one of the three names a local client
/// uses: `localhost`, `127.0.0.1` or `::1`. Any other name is refused even when it resolves
/// here, since a web page can point a name of its own at 127.0.0.1 (DNS rebinding).
#[must_use]
pub fn is_local_authority(value: &str) -> bool {
    authority_host(value).is_some_and(|host| {
        ["localhost", "127.0.0.1", "::1"]
            .iter()
            .any(|local| host.eq_ignore_ascii_case(local))
    })
}

/// The host name of an authority, in its own case (see [`is_local_authority`]).
fn authority_host(value: &str) -> Option<&str> {
    let authority = value.rsplit_once('@').map_or(value, |(_, rest)| rest);
    let host = if let Some(rest) = authority.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.starts_with(':')) {
            return None;
        }
        inside
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    Some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_names_and_literals_are_loopback() {
        for host in [
            "localhost",
            "LOCALHOST",
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "[::1]",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        assert_eq!(
            loopback_ip("Localhost"),
            Some(IpAddr::V4(Ipv4Addr::LOCALHOST))
        );
        for host in [
            "",
            "example.com",
            "localhost.example.com",
            "10.0.0.1",
            "0x7f.0.0.1",
            "0177.0.0.1",
            "2130706433",
            "::ffff:127.0.0.1",
            "::",
            "0.0.0.0",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn host_authorities_follow_url_authority_parsing() {
        for ok in [
            "localhost",
            "localhost:8765",
            "LOCALHOST",
            "[::1]:8765",
            "[::1]",
            "localhost:99999",
            "user@localhost",
            "127.0.0.1:1",
        ] {
            assert!(is_local_authority(ok), "{ok}");
        }
        for bad in [
            "localhost.",
            "127.0.0.2",
            "127.0.0.1.",
            "::1",
            "evil.invalid",
            "evil.invalid:80",
            "[::1]x",
            "",
        ] {
            assert!(!is_local_authority(bad), "{bad}");
        }
    }

    #[test]
    fn mapped_loopback_peers_are_local() {
        for peer in ["127.0.0.1", "::1", "::ffff:127.0.0.1", "127.9.9.9"] {
            assert!(is_loopback_peer(peer.parse().unwrap()), "{peer}");
        }
        for peer in ["10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "0.0.0.0"] {
            assert!(!is_loopback_peer(peer.parse().unwrap()), "{peer}");
        }
    }
}

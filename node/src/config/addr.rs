//! Address checks shared by the configuration and the rest of the node: a dialable
//! `host:port`, and whether a listener or a client is on loopback.
use std::net::IpAddr;

/// Checks `host:port` (a DNS name, IPv4 or bracketed IPv6 host, and a non-zero port).
pub fn check_host_port(addr: &str) -> Result<(), String> {
    let (host, port) = addr.rsplit_once(':').ok_or_else(|| format!("{addr:?} is not host:port"))?;
    let port: u16 = port.parse().map_err(|_| format!("{addr:?} has no valid port"))?;
    if port == 0 {
        return Err(format!("{addr:?}: port 0 cannot be dialled"));
    }
    // An IPv6 host must be bracketed; a DNS name or IPv4 address has no colon.
    let (bare, colon_ok) = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => (v6, true),
        None => (host, false),
    };
    let ok = !bare.is_empty()
        && bare.len() <= 253
        && bare.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') || (colon_ok && c == ':'));
    if !ok {
        return Err(format!("{addr:?} has no valid host"));
    }
    Ok(())
}

/// Whether `ip` is a loopback address, counting IPv4-mapped loopback (`::ffff:127.0.0.1`, as
/// an IPv4 client appears on a `[::]` listener).
pub fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

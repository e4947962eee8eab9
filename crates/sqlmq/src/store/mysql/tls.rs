//! TLS parameters of a MySQL/MariaDB URL, beyond what sqlx does with them itself.
//!
//! sqlx connects through native-tls, which is OpenSSL on Linux (the library the `mariadb` and
//! `mysql` clients use): it accepts the X.509 v1 certificates that rustls/webpki refuses
//! (docs/design/tls.md). Two things are left to sqlmq:
//!
//! - native-tls takes a client key in PKCS#8 PEM only (`BEGIN PRIVATE KEY`), where the
//!   `mariadb` client also takes PKCS#1 (`BEGIN RSA PRIVATE KEY`, as MySQL's generated
//!   `client-key.pem` and OpenSSL 1.1's `openssl rsa` write it) and SEC1 (`BEGIN EC PRIVATE
//!   KEY`): such a key is handed to sqlx converted ([`pkcs8_client_key`]);
//! - the binary-log follower's connection (mysql_async) gets the same `ssl-mode`, `ssl-ca`,
//!   `ssl-cert` and `ssl-key` as the pool's ([`follower_tls`]); mysql_async's native-tls takes
//!   a client certificate as a PKCS#12 archive, made here from the two PEM files.

use std::path::PathBuf;

use mysql_async::SslOpts;

/// The TLS parameters of a database URL, under sqlx's names and aliases.
#[derive(Debug, Default, PartialEq)]
pub(super) struct TlsParams {
    /// `ssl-mode` (`sslmode`), lowercased; `None`: sqlx's default, `preferred`.
    mode: Option<String>,
    /// `ssl-ca` (`sslca`): inline PEM or a file.
    ca: Option<String>,
    /// `ssl-cert` (`sslcert`).
    cert: Option<String>,
    /// `ssl-key` (`sslkey`).
    key: Option<String>,
}

impl TlsParams {
    /// The parameters of `url` (an unparsable URL has none: sqlx reports it).
    pub(super) fn of(url: &str) -> TlsParams {
        let mut params = TlsParams::default();
        let Ok(parsed) = url::Url::parse(url) else {
            return params;
        };
        for (key, value) in parsed.query_pairs() {
            let value = Some(value.into_owned());
            match key.as_ref() {
                "ssl-mode" | "sslmode" => params.mode = value.map(|v| v.to_ascii_lowercase()),
                "ssl-ca" | "sslca" => params.ca = value,
                "ssl-cert" | "sslcert" => params.cert = value,
                "ssl-key" | "sslkey" => params.key = value,
                _ => {}
            }
        }
        params
    }
}

/// A certificate or key parameter as sqlx takes it: PEM text in the URL itself, or the path of
/// a file.
enum Source {
    Inline(Vec<u8>),
    File(PathBuf),
}

impl Source {
    fn of(value: &str) -> Source {
        let trimmed = value.trim();
        if trimmed.starts_with("-----BEGIN") && trimmed.ends_with("-----") {
            Source::Inline(value.as_bytes().to_vec())
        } else {
            Source::File(PathBuf::from(value))
        }
    }
}

/// The contents of a certificate or key parameter.
fn read(value: &str) -> Result<Vec<u8>, String> {
    match Source::of(value) {
        Source::Inline(pem) => Ok(pem),
        Source::File(path) => {
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        }
    }
}

/// The client key (`ssl-key`) as PKCS#8 PEM when it is PEM of another form (PKCS#1, SEC1);
/// `None` when there is no key, or it is PKCS#8 already (sqlx reads it as it is).
pub(super) fn pkcs8_client_key(params: &TlsParams) -> Result<Option<Vec<u8>>, String> {
    let Some(value) = &params.key else {
        return Ok(None);
    };
    let pem = read(value).map_err(|e| format!("ssl-key: {e}"))?;
    let text = String::from_utf8_lossy(&pem);
    let text = text.trim_start();
    if text.starts_with("-----BEGIN PRIVATE KEY-----") || !text.starts_with("-----BEGIN") {
        // PKCS#8, or not PEM at all: sqlx says what it makes of it.
        return Ok(None);
    }
    if text.contains("ENCRYPTED") {
        return Err(
            "ssl-key: the key is encrypted with a passphrase; sqlmq needs it without \
             (`openssl pkey -in key.pem -out plain-key.pem`)"
                .into(),
        );
    }
    openssl_tls::to_pkcs8(&pem)
        .map(Some)
        .map_err(|e| format!("ssl-key: {e}"))
}

/// How the binary-log follower's connection is secured, from the URL's `ssl-mode` as sqlx
/// reads it.
#[derive(Debug)]
pub(super) enum FollowerTls {
    /// `DISABLED`: no TLS.
    Off,
    /// `PREFERRED` (sqlx's default): TLS when the server offers it, the certificate not
    /// verified; a plain connection when it does not.
    Preferred(SslOpts),
    /// `REQUIRED`, `VERIFY_CA`, `VERIFY_IDENTITY`: TLS or no connection.
    Required(SslOpts),
}

/// The follower's TLS options for `params`: what sqlx does for each `ssl-mode` (`REQUIRED`
/// and `PREFERRED` verify nothing; `VERIFY_CA` the chain to `ssl-ca` or the system's
/// authorities; `VERIFY_IDENTITY` also the host name), with the client certificate of
/// `ssl-cert` and `ssl-key`.
pub(super) fn follower_tls(params: &TlsParams) -> Result<FollowerTls, String> {
    let mode = params.mode.as_deref().unwrap_or("preferred");
    let (verify_ca, verify_host) = match mode {
        "disabled" => return Ok(FollowerTls::Off),
        "preferred" | "required" => (false, false),
        "verify_ca" => (true, false),
        "verify_identity" => (true, true),
        other => return Err(format!("unknown ssl-mode {other}")),
    };
    let mut ssl = SslOpts::default()
        .with_danger_accept_invalid_certs(!verify_ca)
        .with_danger_skip_domain_validation(!verify_host);
    if let Some(ca) = &params.ca {
        ssl = ssl.with_root_certs(vec![match Source::of(ca) {
            Source::Inline(pem) => pem.into(),
            Source::File(path) => path.into(),
        }]);
    }
    match (&params.cert, &params.key) {
        (Some(cert), Some(key)) => {
            let p12 = openssl_tls::pkcs12(&read(cert)?, &read(key)?)?;
            let identity = mysql_async::ClientIdentity::new(p12.into())
                .with_password(openssl_tls::PKCS12_PASSWORD);
            ssl = ssl.with_client_identity(Some(identity));
        }
        (None, None) => {}
        _ => return Err("ssl-cert and ssl-key must be given together".into()),
    }
    Ok(if mode == "preferred" {
        FollowerTls::Preferred(ssl)
    } else {
        FollowerTls::Required(ssl)
    })
}

/// Key and certificate conversions, where native-tls is OpenSSL.
#[cfg(not(any(target_os = "windows", target_vendor = "apple")))]
mod openssl_tls {
    use openssl::pkcs12::Pkcs12;
    use openssl::pkey::PKey;
    use openssl::stack::Stack;
    use openssl::x509::X509;

    /// The password of the PKCS#12 archives made here (they never leave the process).
    pub(super) const PKCS12_PASSWORD: &str = "sqlmq";

    /// A private key in any PEM form OpenSSL reads, as PKCS#8 PEM.
    pub(super) fn to_pkcs8(pem: &[u8]) -> Result<Vec<u8>, String> {
        // An empty passphrase: OpenSSL would otherwise prompt on the terminal for one.
        let key = PKey::private_key_from_pem_passphrase(pem, b"")
            .map_err(|e| format!("not a private key OpenSSL reads: {e}"))?;
        key.private_key_to_pem_pkcs8().map_err(|e| e.to_string())
    }

    /// A PKCS#12 archive of a certificate chain (PEM, the client's certificate first) and its
    /// private key (PEM, any form).
    pub(super) fn pkcs12(cert: &[u8], key: &[u8]) -> Result<Vec<u8>, String> {
        let chain = X509::stack_from_pem(cert).map_err(|e| format!("ssl-cert: {e}"))?;
        let mut chain = chain.into_iter();
        let Some(leaf) = chain.next() else {
            return Err("ssl-cert holds no certificate".into());
        };
        let key = PKey::private_key_from_pem_passphrase(key, b"")
            .map_err(|e| format!("ssl-key: not a private key OpenSSL reads: {e}"))?;
        let mut rest = Stack::new().map_err(|e| e.to_string())?;
        for c in chain {
            rest.push(c).map_err(|e| e.to_string())?;
        }
        Pkcs12::builder()
            .name("sqlmq")
            .pkey(&key)
            .cert(&leaf)
            .ca(rest)
            .build2(PKCS12_PASSWORD)
            .and_then(|p| p.to_der())
            .map_err(|e| format!("ssl-cert and ssl-key: {e}"))
    }
}

/// Where native-tls is not OpenSSL (macOS, Windows): keys in PKCS#8 only, and no client
/// certificate for the follower.
#[cfg(any(target_os = "windows", target_vendor = "apple"))]
mod openssl_tls {
    pub(super) const PKCS12_PASSWORD: &str = "";

    pub(super) fn to_pkcs8(_pem: &[u8]) -> Result<Vec<u8>, String> {
        Err(
            "on this platform the key must be PKCS#8 PEM (BEGIN PRIVATE KEY): \
             `openssl pkcs8 -topk8 -nocrypt -in key.pem -out key8.pem`"
                .into(),
        )
    }

    pub(super) fn pkcs12(_cert: &[u8], _key: &[u8]) -> Result<Vec<u8>, String> {
        Err("the binary-log follower takes client certificates on Linux only".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_gives_the_tls_parameters_under_either_name() {
        let p =
            TlsParams::of("mysql://u@h/db?ssl-mode=VERIFY_CA&sslca=/c.pem&ssl-cert=/a&sslkey=/k");
        assert_eq!(
            p,
            TlsParams {
                mode: Some("verify_ca".into()),
                ca: Some("/c.pem".into()),
                cert: Some("/a".into()),
                key: Some("/k".into()),
            }
        );
        assert_eq!(TlsParams::of("mysql://u@h/db"), TlsParams::default());
    }

    #[test]
    fn each_ssl_mode_secures_the_follower_as_sqlx_does() {
        let tls = |url: &str| follower_tls(&TlsParams::of(url));
        assert!(matches!(
            tls("mysql://h/db?ssl-mode=DISABLED"),
            Ok(FollowerTls::Off)
        ));
        let Ok(FollowerTls::Preferred(ssl)) = tls("mysql://h/db") else {
            panic!("the default is PREFERRED")
        };
        assert!(ssl.accept_invalid_certs() && ssl.skip_domain_validation());
        let Ok(FollowerTls::Required(ssl)) = tls("mysql://h/db?ssl-mode=REQUIRED") else {
            panic!()
        };
        assert!(ssl.accept_invalid_certs() && ssl.skip_domain_validation());
        let Ok(FollowerTls::Required(ssl)) = tls("mysql://h/db?ssl-mode=VERIFY_CA&ssl-ca=/c.pem")
        else {
            panic!()
        };
        assert!(!ssl.accept_invalid_certs() && ssl.skip_domain_validation());
        assert_eq!(ssl.root_certs().len(), 1);
        let Ok(FollowerTls::Required(ssl)) = tls("mysql://h/db?ssl-mode=verify_identity") else {
            panic!()
        };
        assert!(!ssl.accept_invalid_certs() && !ssl.skip_domain_validation());
        assert!(tls("mysql://h/db?ssl-mode=sometimes").is_err());
        assert!(tls("mysql://h/db?ssl-mode=REQUIRED&ssl-cert=/c.pem").is_err());
    }

    #[test]
    fn a_pkcs8_key_is_left_to_sqlx_and_a_missing_file_is_named() {
        let params = |key: &str| TlsParams {
            key: Some(key.into()),
            ..TlsParams::default()
        };
        assert_eq!(pkcs8_client_key(&TlsParams::default()), Ok(None));
        let inline = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----";
        assert_eq!(pkcs8_client_key(&params(inline)), Ok(None));
        let e = pkcs8_client_key(&params("/nonexistent/key.pem")).unwrap_err();
        assert!(e.contains("/nonexistent/key.pem"), "{e}");
        let encrypted =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----";
        assert!(
            pkcs8_client_key(&params(encrypted))
                .unwrap_err()
                .contains("passphrase")
        );
    }

    #[cfg(not(any(target_os = "windows", target_vendor = "apple")))]
    #[test]
    fn pkcs1_and_sec1_keys_are_converted_to_the_same_key_in_pkcs8() {
        use openssl::ec::{EcGroup, EcKey};
        use openssl::nid::Nid;
        use openssl::pkey::PKey;
        use openssl::rsa::Rsa;

        let rsa = Rsa::generate(2048).unwrap();
        let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).unwrap();
        let ec = EcKey::generate(&group).unwrap();
        for (pem, tag) in [
            (rsa.private_key_to_pem().unwrap(), "RSA PRIVATE KEY"),
            (ec.private_key_to_pem().unwrap(), "EC PRIVATE KEY"),
        ] {
            let text = String::from_utf8(pem.clone()).unwrap();
            assert!(text.starts_with(&format!("-----BEGIN {tag}-----")));
            let params = TlsParams {
                key: Some(text),
                ..TlsParams::default()
            };
            let pkcs8 = pkcs8_client_key(&params).unwrap().expect("converted");
            assert!(pkcs8.starts_with(b"-----BEGIN PRIVATE KEY-----"));
            let before = PKey::private_key_from_pem(&pem).unwrap();
            let after = PKey::private_key_from_pem(&pkcs8).unwrap();
            assert!(before.public_eq(&after), "{tag}: another key");
        }
    }
}

//! Encrypting backups with age (the `age` crate: X25519 recipients or an scrypt passphrase;
//! nothing hand-rolled). A backup is written through a [`Sink`] and read back through
//! [`open`], which tells an encrypted file from a plain one by its first bytes.
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::str::FromStr;

use age::secrecy::SecretString;

/// The first bytes of an age file (its binary format, not armored).
const AGE_MAGIC: &[u8] = b"age-encryption.org/";

/// How a backup is encrypted when written.
#[derive(Clone, Default)]
pub enum Encryption {
    #[default]
    None,
    /// To an age X25519 recipient (`age1...`).
    Recipient(Box<age::x25519::Recipient>),
    /// With a passphrase (scrypt; slow on purpose).
    Passphrase(SecretString),
}

impl std::fmt::Debug for Encryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Encryption::None => "None",
            Encryption::Recipient(_) => "Recipient",
            Encryption::Passphrase(_) => "Passphrase(<redacted>)",
        })
    }
}

/// What may decrypt a backup.
#[derive(Default)]
pub struct Keys {
    pub identities: Vec<age::x25519::Identity>,
    pub passphrase: Option<SecretString>,
}

/// Why a backup could not be encrypted or decrypted. Never holds a key or a passphrase.
#[derive(Debug, thiserror::Error)]
pub enum CryptError {
    #[error("not an age recipient (expected `age1...`): {0}")]
    Recipient(String),
    #[error("{path}: {why}")]
    KeyFile { path: String, why: String },
    #[error("the backup is encrypted: give the identity file (--identity) or the passphrase (--passphrase-file)")]
    NeedKey,
    #[error("the backup could not be decrypted with the key or passphrase given: {0}")]
    Decrypt(String),
    #[error("encrypting: {0}")]
    Encrypt(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// An age recipient from its text (`age1...`).
pub fn parse_recipient(s: &str) -> Result<age::x25519::Recipient, CryptError> {
    age::x25519::Recipient::from_str(s.trim()).map_err(|e| CryptError::Recipient(e.to_string()))
}

/// The identities of an age identity file (`AGE-SECRET-KEY-1...` lines; `#` comments).
pub fn read_identity_file(path: &Path) -> Result<Vec<age::x25519::Identity>, CryptError> {
    let err = |why: String| CryptError::KeyFile { path: path.display().to_string(), why };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let ids: Vec<_> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .enumerate()
        // The parse error names no part of the key.
        .map(|(i, l)| age::x25519::Identity::from_str(l).map_err(|_| err(format!("line {} is no age identity", i + 1))))
        .collect::<Result<_, _>>()?;
    if ids.is_empty() {
        return Err(err("holds no identity".into()));
    }
    Ok(ids)
}

/// A passphrase from a file: its first line, which must not be empty.
pub fn read_passphrase_file(path: &Path) -> Result<SecretString, CryptError> {
    let err = |why: String| CryptError::KeyFile { path: path.display().to_string(), why };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let line = text.lines().next().unwrap_or("").trim_end_matches('\r');
    if line.is_empty() {
        return Err(err("the passphrase is empty".into()));
    }
    Ok(SecretString::from(line.to_string()))
}

/// A new identity, as the text of an identity file, and its recipient.
pub fn generate() -> (SecretString, String) {
    use age::secrecy::ExposeSecret;
    let id = age::x25519::Identity::generate();
    let public = id.to_public().to_string();
    let text = format!("# leaf backup key\n# public key: {public}\n{}\n", id.to_string().expose_secret());
    (SecretString::from(text), public)
}

/// Where a backup is written: straight to the file, or through age.
pub enum Sink {
    Plain(BufWriter<File>),
    Age(age::stream::StreamWriter<BufWriter<File>>),
}

impl Sink {
    pub fn new(file: File, enc: &Encryption) -> Result<Sink, CryptError> {
        let out = BufWriter::with_capacity(1 << 20, file);
        let encryptor = match enc {
            Encryption::None => return Ok(Sink::Plain(out)),
            Encryption::Recipient(r) => {
                let r: &dyn age::Recipient = r.as_ref();
                age::Encryptor::with_recipients(std::iter::once(r)).map_err(|e| CryptError::Encrypt(e.to_string()))?
            }
            Encryption::Passphrase(p) => age::Encryptor::with_user_passphrase(p.clone()),
        };
        Ok(Sink::Age(encryptor.wrap_output(out)?))
    }

    /// Ends the file (age's last chunk) and returns it, flushed but not synced.
    pub fn finish(self) -> io::Result<File> {
        let out = match self {
            Sink::Plain(w) => w,
            Sink::Age(w) => w.finish()?,
        };
        out.into_inner().map_err(|e| e.into_error())
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Age(w) => w.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Age(w) => w.flush(),
        }
    }
}

/// Opens a backup file for reading: decrypted with `keys` if it is an age file (refused
/// without keys), as it is otherwise. Whether it was encrypted comes back too.
pub fn open(file: File, keys: &Keys) -> Result<(Box<dyn Read + Send>, bool), CryptError> {
    let mut input = BufReader::with_capacity(1 << 20, file);
    let encrypted = input.fill_buf()?.starts_with(AGE_MAGIC);
    if !encrypted {
        return Ok((Box::new(input), false));
    }
    let decryptor = age::Decryptor::new_buffered(input).map_err(|e| CryptError::Decrypt(e.to_string()))?;
    let mut ids: Vec<&dyn age::Identity> = keys.identities.iter().map(|i| i as &dyn age::Identity).collect();
    let scrypt = keys.passphrase.clone().map(age::scrypt::Identity::new);
    if let Some(s) = &scrypt {
        ids.push(s);
    }
    if ids.is_empty() {
        return Err(CryptError::NeedKey);
    }
    let reader = decryptor.decrypt(ids.into_iter()).map_err(|e| CryptError::Decrypt(e.to_string()))?;
    Ok((Box::new(reader), true))
}

#[cfg(test)]
mod tests {
    use std::io::Seek;

    use super::*;

    fn round_trip(enc: &Encryption, keys: &Keys) -> Result<Vec<u8>, CryptError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b");
        let mut sink = Sink::new(File::create(&path).unwrap(), enc).unwrap();
        sink.write_all(b"LEAFBAK1 and the rest").unwrap();
        let mut file = sink.finish().unwrap();
        file.rewind().unwrap();
        let (mut r, encrypted) = open(File::open(&path).unwrap(), keys)?;
        assert_eq!(encrypted, !matches!(enc, Encryption::None));
        let mut out = Vec::new();
        r.read_to_end(&mut out).map_err(|e| CryptError::Decrypt(e.to_string()))?;
        Ok(out)
    }

    #[test]
    fn a_recipient_s_backup_opens_with_its_identity_only() {
        let (text, public) = generate();
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key.txt");
        std::fs::write(&key, age::secrecy::ExposeSecret::expose_secret(&text)).unwrap();
        let enc = Encryption::Recipient(Box::new(parse_recipient(&public).unwrap()));
        let keys = Keys { identities: read_identity_file(&key).unwrap(), passphrase: None };
        assert_eq!(round_trip(&enc, &keys).unwrap(), b"LEAFBAK1 and the rest");
        assert!(matches!(round_trip(&enc, &Keys::default()), Err(CryptError::NeedKey)));
        let other = Keys { identities: vec![age::x25519::Identity::generate()], passphrase: None };
        assert!(matches!(round_trip(&enc, &other), Err(CryptError::Decrypt(_))));
        assert_eq!(round_trip(&Encryption::None, &keys).unwrap(), b"LEAFBAK1 and the rest");
        assert!(parse_recipient("age1nope").is_err());
    }

    #[test]
    fn a_passphrase_backup_opens_with_that_passphrase_only() {
        let enc = Encryption::Passphrase(SecretString::from("correct horse".to_string()));
        let keys = |p: &str| Keys { identities: vec![], passphrase: Some(SecretString::from(p.to_string())) };
        assert_eq!(round_trip(&enc, &keys("correct horse")).unwrap(), b"LEAFBAK1 and the rest");
        let e = round_trip(&enc, &keys("wrong")).unwrap_err();
        assert!(!e.to_string().contains("wrong") && !e.to_string().contains("horse"), "{e}");
    }
}

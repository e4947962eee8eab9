//! Hostile input, as property tests: every parser of the domain and every stored format, fed
//! what an operator or a client may send — quotes, NUL and other control characters, unicode,
//! lengths at and past the limits. A parser returns a value or a typed error and never panics;
//! what is accepted fits its column and reads back unchanged.

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use super::message::{check_headers, encode_errors, parse_errors};
use super::name::validate_key;
use super::{AttemptError, Backoff, Error, GroupMode, MAX_NAME_LEN, MessageId, Receipt};
use super::{StartAt, validate_name};

/// Text of every kind: any unicode (control characters and NUL included), quotes and
/// separators, and long runs of the name alphabet.
fn hostile_text() -> impl Strategy<Value = String> {
    prop_oneof![
        ".{0,40}",
        "[\"'`\\\\;:/,=\\x00\\n\\t ]{0,20}",
        "[A-Za-z0-9._-]{120,135}",
        "\\PC{0,200}",
    ]
}

proptest! {
    #[test]
    fn names_are_accepted_exactly_when_they_use_the_alphabet_within_the_length(
        name in hostile_text()
    ) {
        let expected = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_".contains(&b));
        match validate_name("queue", &name) {
            Ok(()) => prop_assert!(expected, "{name:?} accepted"),
            Err(Error::InvalidName { name: n, .. }) => {
                prop_assert!(!expected, "{name:?} refused");
                prop_assert_eq!(n, name);
            }
            Err(e) => prop_assert!(false, "untyped error {e}"),
        }
    }

    #[test]
    fn keys_are_refused_when_empty_too_long_or_with_control_characters(key in hostile_text()) {
        let expected = !key.is_empty()
            && key.len() <= MAX_NAME_LEN
            && !key.chars().any(char::is_control);
        match validate_key("ordering key", &key) {
            Ok(()) => prop_assert!(expected, "{key:?} accepted"),
            Err(Error::InvalidArgument(_)) => prop_assert!(!expected, "{key:?} refused"),
            Err(e) => prop_assert!(false, "untyped error {e}"),
        }
    }

    #[test]
    fn receipts_and_ids_parse_or_fail_typed(text in hostile_text()) {
        if let Err(e) = text.parse::<Receipt>() {
            prop_assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        if let Err(e) = text.parse::<MessageId>() {
            prop_assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }

    #[test]
    fn receipts_round_trip_through_their_text(
        bytes in any::<[u8; 16]>(),
        token in any::<u64>()
    ) {
        let receipt = Receipt {
            id: MessageId::from_uuid(uuid::Uuid::from_bytes(bytes)),
            token,
        };
        prop_assert_eq!(receipt.to_string().parse::<Receipt>().unwrap(), receipt);
    }

    #[test]
    fn backoffs_parse_or_fail_typed_and_what_is_accepted_never_panics(
        text in prop_oneof![
            hostile_text(),
            "(exp:)?[0-9]{1,22}(ns|ms|s|m|h|d|w|y|years)(:[0-9]{1,22}(ns|s|h|years))?",
            "([0-9]{1,12}(ms|s|h|y)[, ]{1,2}){1,5}[0-9]{1,12}s",
        ]
    ) {
        match text.parse::<Backoff>() {
            Ok(b) => {
                for attempt in [0, 1, 2, 31, 32, 40, 1000, u32::MAX] {
                    for unit in [0.0, 0.5, 1.0] {
                        let _ = b.delay(attempt, unit);
                    }
                }
            }
            Err(e) => prop_assert!(matches!(e, Error::InvalidArgument(_)), "{e}"),
        }
    }

    #[test]
    fn start_positions_and_modes_parse_or_fail_typed(text in hostile_text()) {
        if let Err(e) = text.parse::<StartAt>() {
            prop_assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        if let Err(e) = text.parse::<GroupMode>() {
            prop_assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
    }

    #[test]
    fn headers_read_back_unchanged_from_their_stored_form(
        headers in btree_map(hostile_text(), hostile_text(), 0..6)
    ) {
        let stored = serde_json::to_vec(&headers).unwrap();
        let back: BTreeMap<String, String> = serde_json::from_slice(&stored).unwrap();
        prop_assert_eq!(back, headers);
    }

    #[test]
    fn accepted_headers_fit_their_column(
        value in "[\\x00-\\x1f\"\\\\a]{0,12000}",
        copies in 1usize..12
    ) {
        // Control characters and quotes are escaped when stored: up to six bytes for one.
        let headers: BTreeMap<String, String> =
            (0..copies).map(|i| (format!("h{i}"), value.clone())).collect();
        if check_headers(&headers).is_ok() {
            let stored = serde_json::to_string(&headers).unwrap();
            prop_assert!(stored.len() <= 60 * 1024, "{} bytes stored", stored.len());
        }
    }

    #[test]
    fn error_histories_read_back_unchanged(
        errors in vec((any::<u32>(), hostile_text(), hostile_text()), 0..5)
    ) {
        let errors: Vec<AttemptError> = errors
            .into_iter()
            .map(|(attempt, at, error)| AttemptError { attempt, at, error })
            .collect();
        let stored = encode_errors(&errors);
        let text = String::from_utf8(stored).unwrap();
        prop_assert_eq!(parse_errors(Some(&text)), errors);
    }
}

#[test]
fn backoffs_of_absurd_durations_are_refused_or_computed_without_overflow() {
    // The largest durations humantime accepts, as base and max of an exponential backoff.
    for text in [
        "exp:1s:584942417355years",
        "exp:1ns:18446744073709551615s",
        "exp:18446744073709551615s:18446744073709551615s",
        "exp:10000000000years:10000000000years",
        "18446744073709551615s",
    ] {
        if let Ok(b) = text.parse::<Backoff>() {
            for attempt in [1, 40, u32::MAX] {
                assert!(b.delay(attempt, 1.0) <= Duration::MAX);
            }
        }
    }
}

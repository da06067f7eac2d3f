//! The selector against upstream's own cases (`selector_test.go`) and ours.

use std::collections::BTreeMap;

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| (key.to_string(), value.to_string())).collect()
}

/// Parses `text` and checks its canonical form.
#[track_caller]
fn check(text: &str, canonical: &str) {
    match LabelSelector::parse(text) {
        Ok(selector) => assert_eq!(selector.to_string(), canonical, "{text:?}"),
        Err(err) => panic!("{text:?} should parse: {err}"),
    }
}

#[track_caller]
fn refuse(text: &str) -> SelectorError {
    match LabelSelector::parse(text) {
        Ok(selector) => panic!("{text:?} should be refused, parsed as {selector}"),
        Err(err) => err,
    }
}

#[track_caller]
fn matching(text: &str, pairs: &[(&str, &str)]) -> bool {
    LabelSelector::parse(text).unwrap_or_else(|err| panic!("{text:?}: {err}")).matches(&labels(pairs))
}

#[test]
fn upstream_good_strings_parse_and_print_without_spaces() {
    for text in ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"] {
        check(text, &text.replace(' ', ""));
    }
}

#[test]
fn upstream_bad_strings_are_refused() {
    for text in ["x=a||y=b", "x==a==b", "!x=a", "x<a"] {
        refuse(text);
    }
}

#[test]
fn parsing_is_deterministic() {
    check("x=a,a=x", "a=x,x=a");
    check("a=x,x=a", "a=x,x=a");
}

#[test]
fn upstream_set_based_cases() {
    let good = [
        ("\rx", "x"),
        ("this-is-a-dns.domain.com/key-with-dash", "this-is-a-dns.domain.com/key-with-dash"),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            "0.1.2.domain/99 notin (10.10.100.1,tick.tack.clock)",
        ),
        ("foo  in\t (abc)", "foo in (abc)"),
        ("x notin\n (abc)", "x notin (abc)"),
        ("x  notin\t\t\t(abc,def)", "x notin (abc,def)"),
        ("x in (abc,def)", "x in (abc,def)"),
        ("x in (abc,)", "x in (,abc)"),
        ("x in ()", "x in ()"),
        ("x notin (abc,,def),bar,z in (),w", "bar,w,x notin (,abc,def),z in ()"),
        ("x,y in (a)", "x,y in (a)"),
        ("x=a", "x=a"),
        ("x>1", "x>1"),
        ("x<7", "x<7"),
        ("x=a,y!=b", "x=a,y!=b"),
        ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
        ("x notin ( )", "x notin ()"),
        ("x notin (, a)", "x notin (,a)"),
        ("a ", "a"),
        ("a in (x,y,notin, z,in)", "a in (in,notin,x,y,z)"),
        ("1foo in (bar)", "1foo in (bar)"),
        ("1234 in (bar)", "1234 in (bar)"),
        ("notin=in", "notin=in"),
        ("in in (in)", "in in (in)"),
        ("x==a", "x==a"),
    ];
    for (text, canonical) in good {
        check(text, canonical);
    }
    let bad = [
        "x=a||y=b",
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",
        "a notin(",
        "a (",
        "(",
        "foo>bar",
        "barz<blah",
        "x in (,,)",
        "x in (a,,)",
        "x in (a",
        "x in a",
        "x=(a)",
        "x=a=b",
        "!",
        "!x in (a)",
        ",",
        "x,",
        "=a",
    ];
    for text in bad {
        refuse(text);
    }
}

#[test]
fn upstream_matches() {
    assert!(matching("", &[("x", "y")]));
    assert!(matching("x=y", &[("x", "y")]));
    assert!(matching("x=y,z=w", &[("x", "y"), ("z", "w")]));
    assert!(matching("x!=y,z!=w", &[("x", "z"), ("z", "a")]));
    assert!(matching("notin=in", &[("notin", "in")]));
    assert!(matching("x", &[("x", "z")]));
    assert!(matching("!x", &[("y", "z")]));
    assert!(matching("x>1", &[("x", "2")]));
    assert!(matching("x<1", &[("x", "0")]));
    assert!(!matching("x=z", &[]));
    assert!(!matching("x=y", &[("x", "z")]));
    assert!(!matching("x=y,z=w", &[("x", "w"), ("z", "w")]));
    assert!(!matching("x!=y,z!=w", &[("x", "z"), ("z", "w")]));
    assert!(!matching("x", &[("y", "z")]));
    assert!(!matching("!x", &[("x", "z")]));
    assert!(!matching("x>1", &[("x", "0")]));
    assert!(!matching("x<1", &[("x", "2")]));

    let set = [("foo", "bar"), ("baz", "blah")];
    assert!(matching("foo=bar", &set));
    assert!(matching("baz=blah", &set));
    assert!(matching("foo=bar,baz=blah", &set));
    assert!(!matching("foo=blah", &set));
    assert!(!matching("baz=bar", &set));
    assert!(!matching("foo=bar,foobar=bar,baz=blah", &set));
}

#[test]
fn upstream_set_matches() {
    let xy = [("x", "foo"), ("y", "baz")];
    assert!(matching("x in (foo),y notin (alpha)", &xy));
    assert!(!matching("x in (foo),y in (alpha)", &xy));
    assert!(matching("x notin (),y", &[("y", "")]));
    assert!(matching("!x,y", &[("y", "")]));
    assert!(!matching("x notin (),!y", &[("y", "")]));
    assert!(!matching("x in ()", &[("y", "baz")]));
    assert!(matching("x in ()", &[("x", "")]));
    assert!(matching("z>1", &[("z", "2")]));
    assert!(!matching("z>1", &[("z", "v2")]), "a value that is not a number is never greater");
    assert!(!matching("z<5", &[]), "a missing label is never less");
}

#[test]
fn empty_values_and_absent_labels() {
    assert!(matching("x=", &[("x", "")]));
    assert!(!matching("x=", &[]));
    assert!(!matching("x=", &[("x", "a")]));
    assert!(matching("x!=a", &[]), "!= also matches objects without the label");
    assert!(matching("x notin (a)", &[]));
    assert!(matching("x in (a,)", &[("x", "")]));
    assert!(matching("team in (a,b),env!=prod", &[("team", "b"), ("env", "dev")]));
    assert!(matching("team in (a,b),env!=prod", &[("team", "a")]));
    assert!(!matching("team in (a,b),env!=prod", &[("team", "a"), ("env", "prod")]));
    assert!(!matching("team in (a,b),env!=prod", &[("team", "c")]));
    assert!(LabelSelector::parse("").unwrap().is_empty());
    assert!(LabelSelector::parse("   ").unwrap().is_empty());
    assert!(!LabelSelector::parse("x").unwrap().is_empty());
    assert!(LabelSelector::default().matches(&labels(&[])));
}

#[test]
fn keys_are_qualified_names() {
    for key in
        ["a", "A_b.c-9", "example.com/x", "a.b-c.d/X", &"k".repeat(63), &format!("{}/k", "p".repeat(253))]
    {
        assert!(LabelSelector::parse(key).is_ok(), "{key}");
    }
    let bad = [
        ("-a", "the name must be letters"),
        ("a-", "the name must be letters"),
        ("a b=c", "found \"b\""),
        ("é", "the name must be letters"),
        ("a:b", "the name must be letters"),
        ("/a", "the prefix before '/' must not be empty"),
        ("a/", "the name must not be empty"),
        ("a/b/c", "at most one '/'"),
        ("Example.com/a", "DNS subdomain"),
        ("ex..com/a", "DNS subdomain"),
        ("-ex.com/a", "DNS subdomain"),
        ("k\0", "the name must be letters"),
    ];
    for (text, reason) in bad {
        let message = refuse(text).to_string();
        assert!(message.contains(reason), "{text:?}: {message}");
    }
    let long = "k".repeat(64);
    assert_eq!(
        refuse(&long),
        SelectorError::InvalidKey { key: long.clone(), reason: "the name must be at most 63 characters" }
    );
    let message = refuse(&format!("{}/k", "p".repeat(254))).to_string();
    assert!(message.contains("at most 253"), "{message}");
    let message = refuse(&"a".repeat(254)).to_string();
    assert!(message.contains("at most 63"), "upstream refuses a 254-character key: {message}");
}

#[test]
fn values_are_bounded_names() {
    check(&format!("x={}", "v".repeat(63)), &format!("x={}", "v".repeat(63)));
    let message = refuse(&format!("x={}", "v".repeat(64))).to_string();
    assert!(message.contains("value") && message.contains("at most 63 characters"), "{message}");
    for value in ["-a", "a-", "a/b", "a:b", "ü", "a\u{0}"] {
        let message = refuse(&format!("x in (ok,{value})")).to_string();
        assert!(message.contains("is not a valid label value"), "{value:?}: {message}");
        assert!(message.contains("of key \"x\""), "{message}");
    }
    assert_eq!(refuse("x>a"), SelectorError::NotAnInteger { key: "x".to_string(), value: "a".to_string() });
    refuse("x>99999999999999999999");
}

#[test]
fn messages_say_what_was_found_and_expected() {
    assert_eq!(
        refuse("!x=a"),
        SelectorError::Unexpected { found: "'='".to_string(), expected: "',' or the end" }
    );
    assert_eq!(refuse("x in (a").to_string(), "found the end, expected ',' or ')'");
    assert_eq!(refuse("x,").to_string(), "found the end, expected a key or '!' after ','");
    assert_eq!(refuse("x y").to_string(), "found \"y\", expected one of in, notin, =, ==, !=, >, <");
    assert_eq!(refuse("x in a").to_string(), "found \"a\", expected '('");
    assert_eq!(refuse("(").to_string(), "found '(', expected a key, '!' or the end");
    let message = refuse("x=\u{1b}[31m").to_string();
    assert!(!message.contains('\u{1b}'), "control characters are escaped: {message}");
}

#[test]
fn sizes_are_bounded() {
    let long = format!("x={}", ",y".repeat(MAX_SELECTOR_BYTES));
    assert_eq!(refuse(&long), SelectorError::TooLong { length: long.len() });
    let most: Vec<String> = (0..MAX_REQUIREMENTS).map(|index| format!("k{index}")).collect();
    assert!(LabelSelector::parse(&most.join(",")).is_ok());
    let too_many: Vec<String> = (0..=MAX_REQUIREMENTS).map(|index| format!("k{index}")).collect();
    assert_eq!(refuse(&too_many.join(",")), SelectorError::TooManyRequirements);
    let padded = format!("{}x", " ".repeat(MAX_SELECTOR_BYTES - 1));
    check(&padded, "x");
}

#[test]
fn duplicate_values_and_keys_are_kept_as_upstream_keeps_them() {
    check("x in (b,a,b)", "x in (a,b)");
    check("x=a,x=b", "x=a,x=b");
    assert!(!matching("x=a,x=b", &[("x", "a")]), "both requirements must hold");
}

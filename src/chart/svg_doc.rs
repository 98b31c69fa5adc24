//! Test support: an SVG document parsed as XML, so tests assert on elements, attributes and
//! text rather than on how the markup happens to be spelled. Parsing fails the test on any
//! malformed or mismatched tag and on an entity XML doesn't define.

use std::collections::BTreeMap;

use quick_xml::Reader;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};

#[derive(Debug, Clone)]
pub struct Element {
    pub name: String,
    /// Attribute values with entities resolved.
    pub attrs: BTreeMap<String, String>,
    /// Text directly inside, entities resolved.
    pub text: String,
    /// Names of the enclosing elements, outermost first.
    pub ancestors: Vec<String>,
}

impl Element {
    pub fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).map_or("", String::as_str)
    }

    /// The vertices of a `<polyline>`'s `points`.
    pub fn points(&self) -> Vec<(f64, f64)> {
        self.attr("points")
            .split_whitespace()
            .map(|p| {
                let (x, y) = p.split_once(',').expect("x,y");
                (x.parse().expect("x"), y.parse().expect("y"))
            })
            .collect()
    }
}

#[derive(Debug)]
pub struct SvgDoc {
    /// Every element in document order, the `<svg>` root first.
    pub elements: Vec<Element>,
}

impl SvgDoc {
    /// Parses the first `<svg>...</svg>` in `text` (an HTML page may hold it).
    pub fn parse(text: &str) -> SvgDoc {
        let start = text.find("<svg").expect("an <svg> element");
        let end = text[start..].find("</svg>").expect("a closing </svg>") + start + 6;
        let svg = &text[start..end];
        let mut reader = Reader::from_str(svg);
        let mut elements: Vec<Element> = Vec::new();
        // Indexes into `elements` of the open elements.
        let mut open: Vec<usize> = Vec::new();
        let element = |e: &BytesStart, open: &[usize], elements: &[Element]| Element {
            name: String::from_utf8_lossy(e.name().as_ref()).into_owned(),
            attrs: e
                .attributes()
                .map(|a| {
                    let a = a.expect("attribute parses");
                    (
                        String::from_utf8_lossy(a.key.as_ref()).into_owned(),
                        a.unescape_value()
                            .expect("attribute unescapes")
                            .into_owned(),
                    )
                })
                .collect(),
            text: String::new(),
            ancestors: open.iter().map(|&i| elements[i].name.clone()).collect(),
        };
        loop {
            match reader.read_event() {
                Ok(Event::Start(e)) => {
                    let el = element(&e, &open, &elements);
                    elements.push(el);
                    open.push(elements.len() - 1);
                }
                Ok(Event::Empty(e)) => {
                    let el = element(&e, &open, &elements);
                    elements.push(el);
                }
                Ok(Event::End(_)) => {
                    open.pop().expect("balanced tags");
                }
                Ok(Event::Text(t)) => {
                    if let Some(&i) = open.last() {
                        elements[i]
                            .text
                            .push_str(&t.decode().expect("text decodes"));
                    }
                }
                // quick-xml hands `&amp;` and friends over as events of their own.
                Ok(Event::GeneralRef(r)) => {
                    let name = r.decode().expect("reference decodes");
                    let resolved = resolve_predefined_entity(&name)
                        .unwrap_or_else(|| panic!("unknown entity &{name}; in\n{svg}"));
                    if let Some(&i) = open.last() {
                        elements[i].text.push_str(resolved);
                    }
                }
                Ok(Event::Eof) => break,
                Ok(_) => {}
                Err(e) => panic!("malformed SVG at {}: {e}\n{svg}", reader.buffer_position()),
            }
        }
        assert!(open.is_empty(), "unclosed elements");
        assert_eq!(elements.first().map(|e| e.name.as_str()), Some("svg"));
        SvgDoc { elements }
    }

    pub fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.elements.iter().filter(move |e| e.name == name)
    }

    /// The data lines: polylines of series, not the axes.
    pub fn series(&self) -> Vec<&Element> {
        self.named("polyline")
            .filter(|e| e.attr("class") != "axis")
            .collect()
    }

    /// Text of every `<text>`, in order.
    pub fn texts(&self) -> Vec<&str> {
        self.named("text").map(|e| e.text.as_str()).collect()
    }

    pub fn has_text(&self, want: &str) -> bool {
        self.texts().contains(&want)
    }

    /// Elements drawn in `colour` (series, legend swatches).
    pub fn stroked_with(&self, colour: &str) -> usize {
        self.elements
            .iter()
            .filter(|e| e.attr("stroke") == colour)
            .count()
    }
}

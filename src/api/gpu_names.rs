//! GPU model names people type: an unknown one is a 422 naming the field and the closest
//! names the catalog knows, not an empty answer.

use super::error::FieldError;
use crate::core::catalog::CatalogSnapshot;

/// How many of the closest names a problem lists.
const CLOSEST: usize = 3;

/// Lower case, letters and digits only: `A100-80G`, `a100 80g` and `A10080G` compare equal.
fn folded(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The catalog's GPU names closest to `name`: by edit distance between the folded names, a
/// name that contains the other first, then alphabetically.
pub fn closest<'a>(name: &str, known: &[&'a str]) -> Vec<&'a str> {
    let wanted = folded(name);
    let mut scored: Vec<(usize, bool, &str)> = known
        .iter()
        .map(|k| {
            let f = folded(k);
            let contains = !wanted.is_empty() && (f.contains(&wanted) || wanted.contains(&f));
            (strsim::levenshtein(&wanted, &f), !contains, *k)
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(b.2)));
    scored
        .into_iter()
        .take(CLOSEST)
        .map(|(_, _, k)| k)
        .collect()
}

/// The problem for an unknown GPU name.
pub fn unknown_gpu_problem(catalog: &CatalogSnapshot, name: &str) -> String {
    let known = catalog.gpu_names();
    let near = closest(name, &known)
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("names no GPU model of the catalog: `{name}`; the closest known are {near}")
}

/// A field error for each name in `names` the catalog does not know, as `field[i]`.
pub fn check_gpu_list(catalog: &CatalogSnapshot, field: &str, names: &[String]) -> Vec<FieldError> {
    names
        .iter()
        .enumerate()
        .filter(|(_, n)| !catalog.knows_gpu(n))
        .map(|(i, n)| FieldError {
            field: format!("{field}[{i}]"),
            problem: unknown_gpu_problem(catalog, n),
            line: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_letter_finds_the_name_it_lost() {
        let known = ["A10", "A100", "A100-80GB", "A10G", "H100", "L4", "T4"];
        assert_eq!(
            closest("A100-80G", &known),
            vec!["A100-80GB", "A100", "A10G"]
        );
        assert_eq!(closest("h-100", &known)[0], "H100");
        assert_eq!(closest("t4 ", &known)[0], "T4");
    }
}

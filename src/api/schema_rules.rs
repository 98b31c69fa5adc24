//! Rules between fields that the derived schemas cannot state: "give this field or that one".
//! Each component keeps its derived object schema and gains, through `allOf`, an `anyOf` or
//! `oneOf` of the alternatives, so clients (and schemathesis) see the same rule the handler
//! enforces with a 422.
//!
//! The stored `Policy` gets the same shape: derived, it is `allOf` over the `oneOf` of its
//! modes (serde's flattened, tagged `Mode`), which client generators cannot merge and drop
//! together with every schema that uses it. Here it becomes one object holding every field
//! (`mode` required, each mode's fields optional) with the modes' `oneOf` as its rule.

use serde_json::Value;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::{OpenApi, RefOr};

/// An object that has `field`, of type `ty` (so not null).
fn has(field: &str, ty: Type) -> Schema {
    ObjectBuilder::new()
        .required(field)
        .property(field, ObjectBuilder::new().schema_type(ty))
        .into()
}

/// Wraps the component `name` in `allOf: [derived, rule]`; absent components are left alone
/// (the test below names the ones that must exist). The derived example moves up to
/// the wrapper: generators (schemathesis' fuzzing among them) read a body's example only there.
// `example` is deprecated in OpenAPI 3.1 but is what every derived schema here carries.
#[allow(deprecated)]
fn constrain(spec: &mut OpenApi, name: &str, rule: Schema) {
    let Some(components) = spec.components.as_mut() else {
        return;
    };
    let Some(mut derived) = components.schemas.remove(name) else {
        return;
    };
    let example = match &mut derived {
        RefOr::T(Schema::Object(object)) => object.example.take(),
        _ => None,
    };
    let wrapped = AllOfBuilder::new()
        .item(derived)
        .item(rule)
        .example(example)
        .build();
    components
        .schemas
        .insert(name.to_string(), RefOr::T(Schema::AllOf(wrapped)));
}

/// A policy in one mode: `mode` as `mode_schema`, the fields of the other modes absent or
/// null (`parse_policy` answers "only applies to mode ..." otherwise), `required` given.
fn policy_mode(mode_schema: ObjectBuilder, required: &[&str], foreign: &[&str]) -> Schema {
    let mut branch = ObjectBuilder::new().property("mode", mode_schema);
    for field in required {
        branch = branch.required(*field);
        if *field != "mode" {
            // Required means given: a null node count is no count.
            branch = branch.property(*field, ObjectBuilder::new().schema_type(Type::Integer));
        }
    }
    for field in foreign {
        branch = branch.property(*field, ObjectBuilder::new().schema_type(Type::Null));
    }
    branch.into()
}

/// Rewrites the derived `Policy` (`allOf: [Mode, object]`, `Mode` a `oneOf` of tagged objects)
/// as `allOf: [object with every field, oneOf of the modes]` and drops the `Mode` component,
/// which nothing else uses. Left alone when the derived shape is not the expected one (the
/// test below then fails).
fn flatten_policy(spec: &mut OpenApi) -> Option<()> {
    let components = spec.components.as_mut()?;
    let policy = serde_json::to_value(components.schemas.get("Policy")?).ok()?;
    let mode = serde_json::to_value(components.schemas.get("Mode")?).ok()?;
    let [first, fields] = policy.get("allOf")?.as_array()?.as_slice() else {
        return None;
    };
    if first.get("$ref")?.as_str()? != "#/components/schemas/Mode" {
        return None;
    }
    let mut fields = fields.clone();
    let branches = mode.get("oneOf")?.as_array()?.clone();
    let properties = fields.get_mut("properties")?.as_object_mut()?;
    for branch in &branches {
        for (name, schema) in branch.get("properties")?.as_object()? {
            if name != "mode" {
                properties.insert(name.clone(), schema.clone());
            }
        }
    }
    properties.insert(
        "mode".into(),
        serde_json::json!({"$ref": "#/components/schemas/ModeName"}),
    );
    fields
        .get_mut("required")?
        .as_array_mut()?
        .insert(0, "mode".into());
    if let Some(description) = mode.get("description") {
        fields
            .as_object_mut()?
            .insert("description".into(), description.clone());
    }
    let rule = serde_json::json!({
        "oneOf": branches,
        "description": "Each mode's fields are present in that mode only.",
    });
    let flattened = serde_json::json!({"allOf": [fields, rule]});
    let schema: RefOr<Schema> = serde_json::from_value(flattened).ok()?;
    components.schemas.insert("Policy".into(), schema);
    components.schemas.remove("Mode");
    Some(())
}

/// Adds the alternatives `parse_policy`, `parse_job`, the benchmark check and `/decide`
/// enforce, and gives `Policy` a shape client generators keep.
pub fn document(spec: &mut OpenApi) {
    flatten_policy(spec);
    // Each mode's fields only in that mode; elastic needs its node range. Queue is the
    // default, so its branch also takes an absent or null mode.
    let queue = ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some([Value::from("queue"), Value::Null]));
    let utilization = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["utilization"]));
    let elastic = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(["elastic"]));
    let modes = OneOfBuilder::new()
        .item(policy_mode(
            queue,
            &[],
            &["target_utilization", "tolerance", "min_nodes", "max_nodes", "node_step"],
        ))
        .item(policy_mode(
            utilization,
            &["mode"],
            &["gpus_per_job", "min_nodes", "max_nodes", "node_step"],
        ))
        .item(policy_mode(
            elastic,
            &["mode", "min_nodes", "max_nodes"],
            &["gpus_per_job", "target_utilization", "tolerance"],
        ))
        .description(Some(
            "Each mode's fields only in that mode; mode `elastic` needs `min_nodes` and `max_nodes`.",
        ))
        .build();
    constrain(spec, "PolicyIn", Schema::OneOf(modes));
    // parse_job: "params_billion is required unless gpu_memory_gib_min is given".
    let job = AnyOfBuilder::new()
        .item(has("params_billion", Type::Number))
        .item(has("gpu_memory_gib_min", Type::Number))
        .description(Some("Give `params_billion` or `gpu_memory_gib_min`."))
        .build();
    constrain(spec, "JobIn", Schema::AnyOf(job));
    // A measurement needs a rate: "give samples_per_sec or step_time_sec".
    let benchmark = AnyOfBuilder::new()
        .item(has("samples_per_sec", Type::Number))
        .item(has("step_time_sec", Type::Number))
        .description(Some("Give `samples_per_sec` or `step_time_sec`."))
        .build();
    constrain(spec, "BenchmarkIn", Schema::AnyOf(benchmark));
    // /decide answers 422 to neither and to both; a null counts as not given.
    let decide = OneOfBuilder::new()
        .item(has("job", Type::Object))
        .item(has("pool", Type::String))
        .description(Some("Exactly one of `job` and `pool`."))
        .build();
    constrain(spec, "DecideRequest", Schema::OneOf(decide));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A renamed component would silently lose its rule; this names the ones that must carry it.
    #[test]
    fn the_constrained_components_carry_their_rule() {
        let spec = crate::api::openapi();
        let schemas = &spec.components.as_ref().expect("components").schemas;
        for name in ["PolicyIn", "JobIn", "BenchmarkIn", "DecideRequest"] {
            assert!(
                matches!(schemas.get(name), Some(RefOr::T(Schema::AllOf(_)))),
                "{name} has no allOf rule"
            );
        }
    }

    /// Generators merge `allOf` only over objects: `Policy` must be one object with every
    /// field, its modes a rule beside it, and no `$ref` to a `oneOf` left inside.
    #[test]
    fn the_stored_policy_is_one_object_with_its_modes_as_a_rule() {
        let spec = serde_json::to_value(crate::api::openapi()).unwrap();
        let schemas = &spec["components"]["schemas"];
        assert!(schemas.get("Mode").is_none(), "Mode is folded into Policy");
        let all_of = schemas["Policy"]["allOf"].as_array().expect("allOf");
        let fields = &all_of[0];
        assert_eq!(fields["type"], "object");
        for field in [
            "mode",
            "gpus_per_job",
            "target_utilization",
            "min_nodes",
            "max_workers",
        ] {
            assert!(fields["properties"].get(field).is_some(), "{field}");
        }
        let required = fields["required"].as_array().unwrap();
        assert!(required.contains(&Value::from("mode")));
        assert!(!required.contains(&Value::from("gpus_per_job")));
        let modes = all_of[1]["oneOf"].as_array().expect("the modes' oneOf");
        assert_eq!(modes.len(), 3);
        let elastic = modes
            .iter()
            .find(|m| m["properties"]["mode"]["enum"] == serde_json::json!(["elastic"]))
            .expect("an elastic branch");
        let mut needs: Vec<&str> = elastic["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        needs.sort_unstable();
        assert_eq!(needs, ["max_nodes", "min_nodes", "mode", "node_step"]);
    }
}

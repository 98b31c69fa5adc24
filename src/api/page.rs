pub fn render(_v: &crate::fleet::view::FleetView) -> String {
    String::new()
}

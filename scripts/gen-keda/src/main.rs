//! Writes the tonic/prost code for KEDA's external scaler protocol (server and client) into
//! the folder given as the first argument. Needs `protoc` (Debian: protobuf-compiler).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).ok_or("usage: gen-keda OUT_DIR PROTO_DIR")?;
    let protos = std::env::args().nth(2).ok_or("usage: gen-keda OUT_DIR PROTO_DIR")?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // No `connect` helper: the service needs no client transport; tests bring their own.
        .build_transport(false)
        .out_dir(&out)
        .compile_protos(&[format!("{protos}/externalscaler.proto")], &[protos])?;
    Ok(())
}

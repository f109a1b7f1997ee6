# Writes OUT, a C++ file defining mle::cli::kDiscoveryDocument with the bytes
# of IN (the ml v1 discovery document). The CLI reads field types and enum
# values from it, so --config files and flags are shaped exactly as the server
# it was built with expects.
file(READ ${IN} HEX HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BYTES "${HEX}")
file(WRITE ${OUT} "#include \"absl/strings/string_view.h\"\nnamespace mle::cli {\nstatic const char kBytes[] = {${BYTES}0};\nextern const absl::string_view kDiscoveryDocument;\nconst absl::string_view kDiscoveryDocument(kBytes, sizeof(kBytes) - 1);\n}  // namespace mle::cli\n")

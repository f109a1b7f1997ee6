# Writes OUT, a C++ file defining mle::codec::kDiscoveryDocument with the
# bytes of IN.
file(READ ${IN} HEX HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BYTES "${HEX}")
file(WRITE ${OUT} "#include \"absl/strings/string_view.h\"\nnamespace mle::codec {\nstatic const char kBytes[] = {${BYTES}0};\nextern const absl::string_view kDiscoveryDocument;\nconst absl::string_view kDiscoveryDocument(kBytes, sizeof(kBytes) - 1);\n}\n")

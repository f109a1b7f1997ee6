# Writes OUT, a C++ file defining mle::cli::NAME (an absl::string_view) with
# the bytes of IN, a discovery document. The CLI reads field types and enum
# values from it, so --config files and flags are shaped exactly as the
# server it was built with expects.
file(READ ${IN} HEX HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BYTES "${HEX}")
file(WRITE ${OUT} "#include \"absl/strings/string_view.h\"\nnamespace mle::cli {\nstatic const char ${NAME}Bytes[] = {${BYTES}0};\nextern const absl::string_view ${NAME};\nconst absl::string_view ${NAME}(${NAME}Bytes, sizeof(${NAME}Bytes) - 1);\n}  // namespace mle::cli\n")

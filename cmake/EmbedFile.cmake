# Run with `cmake -P`: writes OUT, a C++ file defining NAMESPACE::NAME (an
# absl::string_view) with the bytes of IN. mle_embed_file (CMakeLists.txt)
# runs it at build time, so a binary carries exactly the document (a
# discovery document, the enums' numbers) it was built with.
file(READ ${IN} HEX HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BYTES "${HEX}")
file(WRITE ${OUT} "#include \"absl/strings/string_view.h\"\nnamespace ${NAMESPACE} {\nstatic const char ${NAME}Bytes[] = {${BYTES}0};\nextern const absl::string_view ${NAME};\nconst absl::string_view ${NAME}(${NAME}Bytes, sizeof(${NAME}Bytes) - 1);\n}  // namespace ${NAMESPACE}\n")

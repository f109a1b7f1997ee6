# Writes OUT, a C++ file defining mle::codec::NAME (default
# kDiscoveryDocument) with the bytes of IN.
if(NOT NAME)
  set(NAME kDiscoveryDocument)
endif()
file(READ ${IN} HEX HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," BYTES "${HEX}")
file(WRITE ${OUT} "#include \"absl/strings/string_view.h\"\nnamespace mle::codec {\nstatic const char ${NAME}Bytes[] = {${BYTES}0};\nextern const absl::string_view ${NAME};\nconst absl::string_view ${NAME}(${NAME}Bytes, sizeof(${NAME}Bytes) - 1);\n}\n")

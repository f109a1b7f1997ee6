# `make package`: mlengine_VERSION_amd64.deb (docs/operations.md, "Install
# and run as a service"), made by CPack's DEB generator. Its Depends are
# Debian's own library packages (dpkg-shlibdeps reads what the binaries
# link), plus what trainers run with. Installed layout:
#   /usr/sbin/mlengined, /usr/bin/mlengine
#   /usr/lib/mlengine/   mlengine-replica, mlengine-sandbox, libmlengine-sandbox.so, mlengine-slurm-launch
#   /usr/share/mlengine/ console/, python/ (the helpers trainers import)
#   /etc/mlengine/mlengined.yaml, /etc/default/mlengined (conffiles)
#   /lib/systemd/system/mlengined.service
#   /var/lib/mlengine    the data directory (made by postinst and systemd)
set(MLE_PKG ${PROJECT_SOURCE_DIR}/packaging)

install(TARGETS mlengined RUNTIME DESTINATION sbin)
install(TARGETS mlengine RUNTIME DESTINATION bin)
install(TARGETS mlengine-replica mlengine-sandbox mlengine-slurm-launch RUNTIME DESTINATION lib/mlengine)
install(TARGETS mlengine_sandbox_lib LIBRARY DESTINATION lib/mlengine NAMELINK_SKIP)
install(DIRECTORY ${CMAKE_BINARY_DIR}/src/server/console/ DESTINATION share/mlengine/console)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/ DESTINATION share/mlengine/python
        PATTERN "tests" EXCLUDE PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_SOURCE_DIR}/config/mlengined.yaml DESTINATION /etc/mlengine)
install(FILES ${MLE_PKG}/mlengined.default DESTINATION /etc/default RENAME mlengined)
install(FILES ${MLE_PKG}/mlengined.service DESTINATION /lib/systemd/system)
install(FILES ${MLE_PKG}/copyright ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operations.md
        DESTINATION share/doc/mlengine)
set(MLE_MAINTAINER "mlengine team <team@mlengine.dev>")
set(MLE_DEB_RELEASE 1)
# Debian's changelog and the manual pages (help2man, from each program's
# --help), compressed as policy asks (no timestamp in the gzip header).
set(MLE_GEN ${CMAKE_BINARY_DIR}/packaging)
set(MLE_CHANGELOG ${MLE_GEN}/changelog.Debian)
file(WRITE ${MLE_CHANGELOG}
     "mlengine (${PROJECT_VERSION}-${MLE_DEB_RELEASE}) stable; urgency=medium\n\n"
     "  * Built from the mlengine source tree.\n\n"
     " -- ${MLE_MAINTAINER}  Sun, 06 Dec 2026 00:00:00 +0000\n")
add_custom_command(OUTPUT ${MLE_CHANGELOG}.gz COMMAND gzip -9nf -k ${MLE_CHANGELOG} DEPENDS ${MLE_CHANGELOG})
# A program's manual page in SECTION, from its --help.
function(mle_man_page target section description)
  set(page ${MLE_GEN}/${target}.${section})
  add_custom_command(
    OUTPUT ${page}.gz
    COMMAND help2man --no-info --section=${section} --name=${description} --output=${page} $<TARGET_FILE:${target}>
    COMMAND gzip -9nf ${page}
    DEPENDS ${target} VERBATIM)
  install(FILES ${page}.gz DESTINATION share/man/man${section})
endfunction()
mle_man_page(mlengined 8 "AI Platform Training's jobs API server")
mle_man_page(mlengine 1 "the command line of mlengine, after gcloud ai-platform")
add_custom_target(debian_docs DEPENDS ${MLE_CHANGELOG}.gz ${MLE_GEN}/mlengined.8.gz ${MLE_GEN}/mlengine.1.gz)
install(FILES ${MLE_CHANGELOG}.gz DESTINATION share/doc/mlengine)
# Explained to lintian: the replica shim and the Slurm launcher are static on
# purpose (they run inside sandboxes and on cluster nodes with nothing of
# mlengine's libraries at hand).
# And it is not uploaded to Debian's archive: there is no ITP bug to close.
file(WRITE ${MLE_GEN}/lintian-overrides
     "mlengine: statically-linked-binary [usr/lib/mlengine/mlengine-replica]\n"
     "mlengine: statically-linked-binary [usr/lib/mlengine/mlengine-slurm-launch]\n"
     "mlengine: initial-upload-closes-no-bugs\n")
install(FILES ${MLE_GEN}/lintian-overrides DESTINATION share/lintian/overrides RENAME mlengine)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mlengine)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_CONTACT "${MLE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_RELEASE ${MLE_DEB_RELEASE})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "AI Platform Training's jobs API, self-hosted")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "mlengine runs ML training jobs on this machine (or a Slurm cluster) behind the\n"
       "same ml v1 REST API, gcloud-style CLI and config.yaml files as Google's AI\n"
       "Platform Training: scale tiers, custom clusters, TPU and GPU hosts,\n"
       "hyperparameter tuning, Cloud Storage's API, access control and a web console.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)  # the build's line tables stay in the build tree
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, python3-venv, python3-pip, python3-setuptools, procps")  # procps: /bin/kill (ExecReload)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-numpy, python3-torch, python3-sklearn")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "podman, runc, slurm-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${MLE_PKG}/debian/postinst ${MLE_PKG}/debian/prerm ${MLE_PKG}/debian/postrm ${MLE_PKG}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

# Install rules and CPack configuration: a .deb and a .tar.gz on Linux, NSIS (and WiX) on Windows,
# a DragNDrop .dmg on macOS. Included at the end of the top-level CMakeLists.txt, after every
# target exists, so each rule below is taken only for the programs this build has: the desktop
# app (tandem) and the headless worker (tandem-worker) join the packages once their targets exist.
#
#   scripts/package                                  release build, then the .deb and .tar.gz
#   cpack --config build/<dir>/CPackConfig.cmake -G DEB
#
# The version is project(VERSION) (installer/version.cmake); nothing here repeats it.

include(GNUInstallDirs)

set(TANDEM_PACKAGE_MAINTAINER "The Tandem developers" CACHE STRING
  "Maintainer of the packages (Debian: \"Name <email>\")")

set(_tandem_installer_dir ${PROJECT_SOURCE_DIR}/installer)
set(_tandem_resources_dir ${PROJECT_SOURCE_DIR}/resources)
set(_tandem_generated_dir ${PROJECT_BINARY_DIR}/installer)

# --- programs ---------------------------------------------------------------------------------
# tandem-coordinator's rule is in app/CMakeLists.txt. The other two are here: app/ may define them
# after any line of its own, and this file runs after all of app/.
if(TARGET tandem)
  if(APPLE)
    install(TARGETS tandem BUNDLE DESTINATION . RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  else()
    install(TARGETS tandem RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endif()
if(TARGET tandem-worker)
  install(TARGETS tandem-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# --- man pages: configured with the version and date, gzipped (Debian policy), one per program --
set(_tandem_man_pages "")
foreach(_exe tandem tandem-worker tandem-coordinator)
  configure_file(${_tandem_installer_dir}/man/${_exe}.1.in ${_tandem_generated_dir}/man/${_exe}.1
    @ONLY)
  set(_page ${_tandem_generated_dir}/man/${_exe}.1.gz)
  add_custom_command(OUTPUT ${_page}
    COMMAND gzip -9 -n -c ${_tandem_generated_dir}/man/${_exe}.1 > ${_page}
    DEPENDS ${_tandem_generated_dir}/man/${_exe}.1
    COMMENT "gzip man page ${_exe}.1" VERBATIM)
  list(APPEND _tandem_man_pages ${_page})
  if(UNIX AND NOT APPLE AND TARGET ${_exe})
    install(FILES ${_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  endif()
endforeach()
add_custom_target(tandem_man ALL DEPENDS ${_tandem_man_pages})

# --- desktop integration (Linux): with the desktop app ------------------------------------------
# AppStream screenshots must be http(s) URLs: with TANDEM_SCREENSHOT_BASE_URL set (where
# docs/screenshots/ is published), each docs/screenshots/*.png becomes a <screenshot>, the first
# in name order the default. Without it (the project has no public address yet) there are none.
set(TANDEM_SCREENSHOT_BASE_URL "" CACHE STRING
  "Public http(s) URL of docs/screenshots/, for the AppStream metainfo's screenshots")
set(TANDEM_METAINFO_SCREENSHOTS "")
file(GLOB _tandem_screenshots CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR}/docs/screenshots
  ${PROJECT_SOURCE_DIR}/docs/screenshots/*.png)
list(SORT _tandem_screenshots)
if(TANDEM_SCREENSHOT_BASE_URL AND _tandem_screenshots)
  string(REGEX REPLACE "/+$" "" _base "${TANDEM_SCREENSHOT_BASE_URL}")
  set(_type " type=\"default\"")
  string(APPEND TANDEM_METAINFO_SCREENSHOTS "<screenshots>\n")
  foreach(_png ${_tandem_screenshots})
    # "wizard-bandwidth.png" -> caption "Wizard bandwidth"
    string(REGEX REPLACE "\\.png$" "" _caption "${_png}")
    string(REPLACE "-" " " _caption "${_caption}")
    string(REPLACE "_" " " _caption "${_caption}")
    string(SUBSTRING "${_caption}" 0 1 _first)
    string(SUBSTRING "${_caption}" 1 -1 _rest)
    string(TOUPPER "${_first}" _first)
    string(APPEND TANDEM_METAINFO_SCREENSHOTS
      "    <screenshot${_type}>\n      <caption>${_first}${_rest}</caption>\n"
      "      <image>${_base}/${_png}</image>\n    </screenshot>\n")
    set(_type "")
  endforeach()
  string(APPEND TANDEM_METAINFO_SCREENSHOTS "  </screenshots>")
endif()
configure_file(${_tandem_resources_dir}/org.tandem.Tandem.metainfo.xml.in
  ${_tandem_generated_dir}/org.tandem.Tandem.metainfo.xml @ONLY)
if(UNIX AND NOT APPLE AND TARGET tandem)
  install(FILES ${_tandem_resources_dir}/tandem.desktop
    DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
  install(FILES ${_tandem_generated_dir}/org.tandem.Tandem.metainfo.xml
    DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
  install(FILES ${_tandem_resources_dir}/icons/tandem.svg
    DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
  # "Start at login" copies this to ~/.config/autostart/tandem.desktop (XDG autostart); it is not
  # installed to /etc/xdg/autostart, which would start Tandem for every user of the computer.
  install(FILES ${_tandem_resources_dir}/tandem-autostart.desktop
    DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/autostart RENAME tandem.desktop)
endif()

# --- systemd user unit (Linux): with the headless worker ----------------------------------------
# lib/systemd/user under the prefix: /usr/lib/systemd/user in the .deb, /usr/local/lib/systemd/user
# from source; both are on systemd's user unit search path.
if(UNIX AND NOT APPLE AND TARGET tandem-worker)
  install(FILES ${_tandem_installer_dir}/systemd/tandem-worker.service
    DESTINATION lib/systemd/user)
endif()

# --- nginx server blocks for coordinator operators (docs/operations.md): with the coordinator ---
if(UNIX AND NOT APPLE AND TARGET tandem-coordinator)
  install(FILES ${_tandem_installer_dir}/nginx/tandem-blobs-origin.conf
    ${_tandem_installer_dir}/nginx/tandem-blobs-mirror.conf
    ${_tandem_installer_dir}/nginx/tandem-front-ends.conf
    ${_tandem_installer_dir}/nginx/README.md
    DESTINATION ${CMAKE_INSTALL_DATADIR}/tandem/nginx)
endif()

# --- Windows and macOS: the Qt libraries go next to the program --------------------------------
if((WIN32 OR APPLE) AND TARGET tandem)
  set_target_properties(tandem PROPERTIES WIN32_EXECUTABLE ON MACOSX_BUNDLE ON
    MACOSX_BUNDLE_BUNDLE_NAME "Tandem"
    MACOSX_BUNDLE_GUI_IDENTIFIER "org.tandem.Tandem"
    MACOSX_BUNDLE_ICON_FILE "tandem.icns"
    MACOSX_BUNDLE_SHORT_VERSION_STRING "${PROJECT_VERSION}"
    MACOSX_BUNDLE_BUNDLE_VERSION "${PROJECT_VERSION}")
  if(APPLE)
    target_sources(tandem PRIVATE ${_tandem_resources_dir}/icons/tandem.icns)
    set_source_files_properties(${_tandem_resources_dir}/icons/tandem.icns PROPERTIES
      MACOSX_PACKAGE_LOCATION Resources)
  endif()
  if(COMMAND qt_generate_deploy_app_script)
    qt_generate_deploy_app_script(TARGET tandem OUTPUT_SCRIPT _tandem_deploy_script
      NO_UNSUPPORTED_PLATFORM_ERROR)
    install(SCRIPT ${_tandem_deploy_script})
  endif()
endif()

# --- CPack: common ------------------------------------------------------------------------------
set(CPACK_PACKAGE_NAME "tandem")
set(CPACK_PACKAGE_VENDOR "The Tandem developers")
set(CPACK_PACKAGE_CONTACT "${TANDEM_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
# Lines of at most 80 columns: the .deb's long description keeps them. It lists the programs
# this build packages.
set(_tandem_program_lines "")
if(TARGET tandem)
  list(APPEND _tandem_program_lines "tandem is the desktop app, with a tray icon.")
endif()
if(TARGET tandem-worker)
  list(APPEND _tandem_program_lines
    "tandem-worker is the headless worker for servers, with a systemd user unit.")
endif()
if(TARGET tandem-coordinator)
  list(APPEND _tandem_program_lines
    "tandem-coordinator is the server that hands out the work of a training run.")
endif()
string(JOIN "\n" CPACK_PACKAGE_DESCRIPTION
  "Tandem lets you donate the spare GPU time of your own PC to the training of"
  "an open language model. It joins a training run held by a coordinator, trains"
  "DiLoCo work units on your GPU (or CPU) and sends back compact pseudo-gradients,"
  "so a home connection is enough."
  "."
  ${_tandem_program_lines})
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_INSTALL_DIRECTORY "Tandem")
if(TARGET tandem)
  set(CPACK_PACKAGE_EXECUTABLES "tandem" "Tandem")  # Start menu entry (NSIS, WiX)
endif()
set(CPACK_STRIP_FILES ON)
set(CPACK_VERBATIM_VARIABLES ON)
set(CPACK_SOURCE_IGNORE_FILES "/\\.git/" "/build/" "/\\.cache/")

# --- Linux: .deb and .tar.gz --------------------------------------------------------------------
if(UNIX AND NOT APPLE)
  set(CPACK_GENERATOR "DEB;TGZ")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64)$")
    set(_tandem_arch "x86_64")
  else()
    set(_tandem_arch "${CMAKE_SYSTEM_PROCESSOR}")
  endif()
  # tar.gz: tandem-0.1.0-linux-x86_64.tar.gz with a top-level directory of the same name.
  set(CPACK_PACKAGE_FILE_NAME "tandem-${PROJECT_VERSION}-linux-${_tandem_arch}")

  # .deb: tandem_0.1.0_amd64.deb, installing under /usr.
  set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
  set(CPACK_DEBIAN_PACKAGE_NAME "tandem")
  set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${TANDEM_PACKAGE_MAINTAINER}")
  set(CPACK_DEBIAN_PACKAGE_SECTION "science")
  set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
  # Libraries the programs link (OpenSSL, libcurl, SQLite, OpenBLAS, Qt, libstdc++) are found by
  # dpkg-shlibdeps; what is only loaded at run time is listed by hand.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  set(_tandem_depends "")
  set(_tandem_recommends "ca-certificates")
  if(TARGET tandem)
    # Qt's platform plugins (xcb) and the SVG icon engine are plugins, invisible to dpkg-shlibdeps.
    list(APPEND _tandem_depends "qt6-qpa-plugins" "libqt6svg6")
    list(APPEND _tandem_recommends "qt6-wayland")
  endif()
  list(JOIN _tandem_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
  list(JOIN _tandem_recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
  set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
  set(CPACK_DEBIAN_COMPRESSION_TYPE "xz")
  # The .deb installs under /usr (CPack's default for DEB); the .tar.gz holds bin/, share/, lib/.
endif()

# --- Windows: NSIS (the default) and WiX --------------------------------------------------------
if(WIN32)
  set(CPACK_GENERATOR "NSIS;ZIP")
  set(CPACK_PACKAGE_FILE_NAME "tandem-${PROJECT_VERSION}-windows-x64")
  # The identity of the installed product across versions: never change these two.
  # NSIS finds the previous install under this registry key; WiX upgrades by this GUID.
  set(CPACK_PACKAGE_INSTALL_REGISTRY_KEY "Tandem")
  set(CPACK_WIX_UPGRADE_GUID "C46A26FD-D2D4-4ACB-98A0-AAAF2C133492")
  set(_tandem_ico "${_tandem_resources_dir}/icons/tandem.ico")
  set(CPACK_NSIS_PACKAGE_NAME "Tandem")
  set(CPACK_NSIS_DISPLAY_NAME "Tandem ${PROJECT_VERSION}")
  set(CPACK_NSIS_MUI_ICON "${_tandem_ico}")
  set(CPACK_NSIS_MUI_UNIICON "${_tandem_ico}")
  set(CPACK_NSIS_INSTALLED_ICON_NAME "bin\\tandem.exe")
  set(CPACK_NSIS_CONTACT "${TANDEM_PACKAGE_MAINTAINER}")
  set(CPACK_NSIS_ENABLE_UNINSTALL_BEFORE_INSTALL ON)
  set(CPACK_NSIS_MODIFY_PATH OFF)
  set(CPACK_NSIS_EXECUTABLES_DIRECTORY "bin")
  set(CPACK_NSIS_MUI_FINISHPAGE_RUN "tandem.exe")
  set(CPACK_WIX_PRODUCT_ICON "${_tandem_ico}")
  set(CPACK_WIX_PROGRAM_MENU_FOLDER "Tandem")
  set(CPACK_WIX_PROPERTY_ARPCOMMENTS "${PROJECT_DESCRIPTION}")
endif()

# --- macOS: a .dmg to drag Tandem.app from ------------------------------------------------------
if(APPLE)
  set(CPACK_GENERATOR "DragNDrop")
  set(CPACK_PACKAGE_FILE_NAME "tandem-${PROJECT_VERSION}-macos")
  set(CPACK_DMG_VOLUME_NAME "Tandem ${PROJECT_VERSION}")
  set(CPACK_DMG_FORMAT "UDZO")
  set(CPACK_PACKAGE_ICON "${_tandem_resources_dir}/icons/tandem.icns")
  # The bundle identifier (org.tandem.Tandem, above) is what macOS knows the app by across
  # versions, as the upgrade GUID is on Windows.
endif()

include(CPack)

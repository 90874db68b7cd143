"""The build stage: a materialised pinned tree -> a cached CMake/Ninja build with the binaries the gates need."""

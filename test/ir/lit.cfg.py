# The Tally IR golden-test suite (lit + FileCheck). Kept minimal on purpose: no lit.llvm helpers.
import os
import lit.formats

config.name = "tally-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".stmt"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tally_obj_root, "test", "ir")

config.substitutions.append(("tally-opt", config.tally_opt))
config.substitutions.append(("FileCheck", config.filecheck))
config.substitutions.append(("not ", config.not_tool + " "))
config.substitutions.append(("%corpus", config.corpus_dir))
config.environment["MESA_SHADER_CACHE_DISABLE"] = "true"
# CUDA's libdevice (test/CMakeLists.txt finds it): tests of PTX that calls it REQUIRE libdevice.
if config.libdevice and not config.libdevice.endswith("-NOTFOUND"):
    config.environment["TALLY_LIBDEVICE"] = config.libdevice
    config.available_features.add("libdevice")

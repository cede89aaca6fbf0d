# The "poor man's configurator" of single-file trainers: exec'd by train.py, it overrides the
# globals train.py defined from the command line. `python3 train.py config/x.py --lr=3e-3
# --compile=False`: a bare argument is a Python file to exec, `--key=value` sets key to value read
# as a Python literal (a string when it is not one). A key train.py does not define is an error.
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    if "=" not in arg:
        assert not arg.startswith("--"), f"{arg}: expected --key=value"
        print(f"Overriding config with {arg}:")
        with open(arg) as f:
            exec(f.read())
    else:
        assert arg.startswith("--"), f"{arg}: expected --key=value"
        key, val = arg.split("=", 1)
        key = key[2:]
        if key not in globals():
            raise ValueError(f"Unknown config key: {key}")
        try:
            attempt = literal_eval(val)
        except (SyntaxError, ValueError):
            attempt = val
        if globals()[key] is not None and attempt is not None:
            assert type(attempt) == type(globals()[key]), \
                f"{key}: {attempt!r} is not a {type(globals()[key]).__name__}"
        print(f"Overriding: {key} = {attempt}")
        globals()[key] = attempt

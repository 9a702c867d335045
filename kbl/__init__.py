"""kbl: the KernelBench leaderboard's command-line client (standard library only).

    kbl submit RUN_DIR|ZIP --model M --hardware h200 [--verify] [--wait]
    kbl status RUN_ID
    kbl kernel PROBLEM KERNEL.py --hardware h200 [--wait]
    kbl export RUN_ID -o run.zip

The site's URL and the API token come from --url/--token, the environment (KBL_URL, KBL_TOKEN) or
a config file (KBL_CONFIG, default ~/.config/kbl/config: an INI file with url and token under [kbl]).
"""

__version__ = "0.1.0"

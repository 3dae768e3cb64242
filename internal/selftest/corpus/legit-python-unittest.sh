# class: legitimate
# expect: allowed
# control: sandbox
# reason: a small Python project's unittest suite runs with the host's python3 (bound with /usr); not run when none is installed
command -v python3 >/dev/null || { missing python3; exit 0; }
mkdir -p selftest-py && cd selftest-py
printf 'def add(a, b):\n    return a + b\n' >calc.py
printf 'import unittest\n\nimport calc\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n\nif __name__ == "__main__":\n    unittest.main()\n' >test_calc.py
attempt python3 -B -m unittest -v test_calc

# class: legitimate
# expect: allowed
# control: sandbox
# reason: an offline build (shell, and C when a compiler is installed) works inside the limits
attempt sh -c 'mkdir -p "$HOME/b" && cd "$HOME/b" && printf "#!/bin/sh\necho built\n" >tool && chmod +x tool && ./tool && if command -v cc >/dev/null; then printf "int main(void){return 0;}\n" >m.c && cc -o m m.c && ./m && echo cc; fi'

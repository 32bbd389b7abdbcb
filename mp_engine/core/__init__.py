"""The foundations every stage stands on, each owning one dangerous or shared thing: the one
atomic write (`atomic`), the one git runner (`gitcmd`), the workspace lock (`lock`), other
processes (`pids`), the disk (`disk`), secrets held out of the environment (`secretenv`),
every path (`workspace`), time (`clock`), the error tree (`errors`) and exit codes
(`exitcodes`), text for a terminal (`terminal`). Nothing here imports a stage."""

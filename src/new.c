int other_thing(void) { return 2; }

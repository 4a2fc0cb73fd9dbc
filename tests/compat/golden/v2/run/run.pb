

	alice/webalice.web.0.1	/bin/true*	Ø€€€€0è:@ÈRaliceˆ
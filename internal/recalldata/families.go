package recalldata

import "fmt"

// l is a list of templates or slot values.
func l(xs ...string) []string { return xs }

// q is an ask: the question in the answer's words (lex) and in other
// words (para).
func q(lex, para []string) []ask { return []ask{{lex: lex, para: para}} }

// families are the history's facts: recurring events whose instances look
// alike (near-duplicates that differ in a name, a day, a price) and
// stories told once whose decisions are later revised.
func families() []family {
	fs := []family{
		plumber, electrician, vet, carJobs, birthdays, appointments, school,
		babysitters, lent, orders, insurance, garden,
		backupStory, holidayStory, broadbandStory, carStory, heatingStory, screenStory,
	}
	fs = append(fs, memoryFacts(), decisions(), motherAnswers(), dailyNotes(), chickResults(), bills(), memoryNoise())
	return fs
}

var plumber = family{
	n: 7,
	slots: map[string][]string{
		"problem": l("leaking tap in the kitchen|dripping kitchen faucet", "blocked shower drain|clogged plughole in the shower",
			"dripping pipe under the bathroom sink|leaky pipework below the washbasin", "toilet upstairs that keeps running|upstairs loo that never stops filling",
			"burst pipe in the loft|split pipe up in the attic", "leaking washing machine hose|washer hose that drips", "outside tap that froze|garden spigot that iced up"),
		"company": l("Kowalski Plumbing", "PipeRight", "Dave Marsh", "AquaFix", "Hendry & Sons", "FlowWorks", "Castle Plumbers"),
		"day":     l("Thursday morning", "Monday at 8", "Saturday at 9", "Friday afternoon", "Tuesday after lunch", "Wednesday evening", "Sunday, at the emergency rate"),
	},
	steps: []step{
		{who: "person", texts: l("The {problem} is back. Can someone get a plumber in?", "Ugh, the {problem} again. We need a plumber.", "The {problem} is getting worse, we should call someone.")},
		{who: "other", after: "h", key: "company", texts: l("I rang {company}, they're coming {day} to look at the {problem}.", "Booked {company} for {day} to sort out the {problem}.", "{company} can do {day} for the {problem}, I said yes."),
			ask: []ask{
				{lex: l("which plumber did we book for the {problem}?", "who did we call about the {problem}?"), para: l("what was the name of the firm that came for the {problem~}?", "who did we get in to fix the {problem~}?")},
				{lex: l("when is the plumber coming for the {problem}?"), para: l("what day is someone coming to repair the {problem~}?"), p: 0.3},
			}},
		{who: "mother", after: "m", texts: l("Noted. Shall I remind you the evening before?", "I'll add it to the calendar.", "Got it. I'll remind whoever is home that morning.")},
	},
}

var electrician = family{
	n: 6,
	slots: map[string][]string{
		"problem": l("fuse box that keeps tripping|breaker that keeps cutting out", "dead sockets in the living room|outlets not working in the lounge",
			"flickering lights in the hall|hallway lamps that blink", "outside light that stopped working|broken porch lamp", "oven that trips the power|cooker that cuts the electricity",
			"smoke alarm that keeps beeping|smoke detector that chirps"),
		"company": l("Brightwire Electrical", "Jo Pennant", "Volt & Co", "Sparks Direct", "Mike Ferris", "Current Electrical"),
		"price":   l("£90", "£145", "£60 plus parts", "£210", "£75", "£120"),
	},
	steps: []step{
		{who: "person", texts: l("The {problem} again. Who do we know who does electrics?", "Can we please get the {problem} looked at.")},
		{who: "other", after: "d", key: "company", texts: l("{company} quoted {price} to fix the {problem}, they can come next week.", "Got a quote from {company}: {price} for the {problem}. Going ahead."),
			ask: []ask{
				{lex: l("which electrician quoted for the {problem}?"), para: l("who was the sparky for the {problem~}?", "which wiring firm did we use for the {problem~}?")},
				{lex: l("how much did the electrician want for the {problem}?"), para: l("what was the price to repair the {problem~}?"), p: 0.4},
			}},
	},
}

var vet = family{
	n: 7,
	slots: map[string][]string{
		"thing": l("booster jab|yearly vaccination", "flea treatment|tick and flea dose", "limp on his back leg|sore hind leg", "ear infection check|infected ear",
			"teeth cleaning|dental clean", "nail clipping|claw trim", "weigh-in for his diet|weight check"),
		"clinic": l("Greenacre Vets", "Riverside Veterinary", "the vet on Station Road", "Greenacre Vets", "Riverside Veterinary", "the PDSA clinic", "Greenacre Vets"),
		"when":   l("Tuesday at 4:30", "Friday at 9:15", "Saturday at 11:40", "Monday at 5:45", "Wednesday at 8:20", "Thursday at 3:10", "Friday at 12:50"),
	},
	reuse: map[string]bool{"clinic": true},
	steps: []step{
		{who: "person", texts: l("Biscuit needs his {thing} soon.", "Don't forget Biscuit's {thing}.", "Biscuit's {thing} is overdue I think.")},
		{who: "other", after: "h", key: "when", texts: l("Booked Biscuit's {thing} at {clinic} for {when}.", "{clinic} can see Biscuit for the {thing} on {when}.")},
	},
}

func init() {
	vet.steps[1].ask = q(l("when is Biscuit's {thing}?", "what time is Biscuit booked for the {thing}?"), l("when does the dog go in for his {thing~}?", "what day is the puppy's {thing~} appointment?"))
}

var carJobs = family{
	n: 6,
	slots: map[string][]string{
		"job": l("MOT|annual inspection", "two new front tyres|replacement front tires", "new brake pads|braking repair", "oil change and service|yearly servicing",
			"cracked windscreen|chipped windshield", "air con regas|air con top-up"),
		"garage": l("Kwik Fit on Mill Road", "Dawson Motors", "the Halfords in town", "Pete's Garage", "AutoCare Centre", "Riverside Motors"),
		"price":  l("£54.85", "£180", "£95", "£240", "£70", "£310"),
	},
	steps: []step{
		{who: "mother", texts: l("Reminder: the car is due its {job} this month.", "Reminder: the Golf needs its {job} soon.")},
		{who: "adult", after: "d", key: "garage", texts: l("Car's booked in at {garage} for the {job}, {price}.", "{garage} are doing the {job} on the Golf for {price}.")},
	},
}

func init() {
	carJobs.steps[1].ask = []ask{
		{lex: l("where is the car booked for the {job}?", "which garage is doing the {job}?"), para: l("which mechanic is doing the vehicle's {job~}?", "who is handling the {job~} on our motor?")},
		{lex: l("how much is the {job} costing?"), para: l("what's the {job~} going to cost us?"), p: 0.4},
	}
}

var birthdays = family{
	n: 8,
	slots: map[string][]string{
		"person": l("Grandma Rose", "Uncle Jim", "Maya", "Aunt Sue", "cousin Ollie", "Tom's dad", "Finn next door", "Anna's sister Kate", "Mr Patel"),
		"gift": l("a pottery class voucher|a gift card for a ceramics workshop", "a cashmere scarf|a soft wool scarf", "a Lego Technic set|a building brick kit",
			"an Ottolenghi cookbook|a recipe book", "Coldplay concert tickets|gig tickets", "a photo calendar|a calendar of family pictures",
			"a fitness watch|a smartwatch for exercise", "a framed print of their house|a picture of their home in a frame", "a bird feeder camera|a camera for the bird table"),
	},
	steps: []step{
		{who: "person", texts: l("{person}'s birthday is coming up, any ideas?", "What shall we get {person} for the birthday?")},
		{who: "other", after: "h", key: "gift", texts: l("Let's get {person} {gift}. I'll order it.", "Decided: {gift} for {person}.", "Going with {gift} for {person}, agreed?"),
			ask: q(l("what are we getting {person} for the birthday?", "which gift did we choose for {person}?"), l("what present did we pick for {person}?", "what did we decide to buy {person}?"))},
		{who: "mother", after: "m", texts: l("Shall I remind you a week before to wrap it?", "Noted. I'll remind you to send a card too.")},
	},
}

var appointments = family{
	n:     12,
	reuse: map[string]bool{"person": true},
	slots: map[string][]string{
		"person": l("Anna", "Tom", "Lily", "Sam", "Grandma Rose"),
		"kind": l("dentist checkup|dental check", "GP appointment about the cough|doctor visit for the cough", "eye test at the optician|vision check",
			"physio for the knee|physiotherapy on the knee", "haircut|trim at the hairdresser", "blood test|bloods at the surgery",
			"orthodontist visit for the brace|braces check", "hearing test|ear check", "flu jab|flu vaccination", "skin clinic referral|dermatology appointment",
			"asthma review|inhaler check at the surgery", "allergy test|allergies appointment"),
		"when": l("Tuesday 9 September at 10:20", "the 14th at 8:45", "Friday at 15:30", "Monday 3 November at 11:00", "Wednesday at 16:10", "next Thursday at 9:05",
			"the 2nd at 14:40", "Saturday at 10:00", "Tuesday at 17:15", "the 21st at 13:25", "Monday at 8:30", "Friday 12 December at 9:50"),
	},
	steps: []step{
		{who: "person", key: "when", texts: l("{person}'s {kind} is {when}.", "Booked: {person}, {kind}, {when}.", "{person} has the {kind} on {when}, can someone drive?"),
			ask: q(l("when is {person}'s {kind}?"), l("what time is {person}'s {kind~}?", "which day did we book {person}'s {kind~} for?"))},
		{who: "mother", after: "m", texts: l("I'll remind you the day before.", "Added to the family calendar.")},
	},
}

var school = family{
	n:     8,
	reuse: map[string]bool{"child": true},
	slots: map[string][]string{
		"child": l("Lily", "Sam"),
		"event": l("parents' evening|teacher meeting", "sports day|athletics day", "school trip to the Science Museum|class outing to the science museum",
			"Christmas play|festive show", "inset day|teacher training day off", "mock exams|practice tests", "school photo day|class pictures day", "fun run|charity race"),
		"when": l("Thursday 16 October from 4pm", "Friday 11 July", "Wednesday 24 September, £18", "Tuesday 9 December at 2pm", "Monday 1 September",
			"the week of 17 November", "Tuesday 7 October", "Friday 27 June"),
	},
	steps: []step{
		{who: "adult", key: "when", texts: l("{child}'s {event} is {when}.", "Letter from school: {child}'s {event}, {when}."),
			ask: q(l("when is {child}'s {event}?"), l("what date is {child}'s {event~}?", "when's the {event~} for {child}?"))},
		{who: "other", after: "m", texts: l("I'll put it on the fridge.", "Can you forward me the letter?", "ok")},
	},
}

var babysitters = family{
	n: 6,
	slots: map[string][]string{
		"sitter": l("Chloe from next door", "Mrs Okoro", "Jess Whitfield", "Hannah Price", "Ben Carter", "Megan from church"),
		"event": l("the Hendersons' dinner party|dinner at the Hendersons'", "Anna's work do|Anna's office party", "the school quiz night|the quiz evening at school",
			"the wedding in Bath|the Bath wedding", "the theatre on Saturday|the play in town", "Tom's leaving drinks|Tom's farewell drinks"),
	},
	steps: []step{
		{who: "adult", texts: l("We need a babysitter for {event}.", "Who can we get to babysit for {event}?")},
		{who: "other", after: "h", key: "sitter", texts: l("{sitter} is babysitting for {event}, 7 till midnight.", "Sorted: {sitter} will sit for {event}."),
			ask: q(l("who is babysitting for {event}?", "which babysitter did we get for {event}?"), l("who's minding the kids during {event~}?", "who's looking after the children for {event~}?"))},
	},
}

var lent = family{
	n: 7,
	slots: map[string][]string{
		"who": l("Gary at number 9", "the Okafors at number 4", "Priya across the road", "Mr Doyle", "Claire from book club", "Auntie Pam", "Dan next door"),
		"item": l("ladder|step ladder", "hedge trimmer|hedge cutter", "tent|camping tent", "pressure washer|jet washer", "cool box|cooler bag",
			"jump leads|jumper cables", "drill|cordless drill"),
	},
	steps: []step{
		{who: "person", key: "who", texts: l("FYI {who} borrowed our {item}, back next week.", "Lent the {item} to {who}."),
			ask: q(l("who borrowed the {item}?", "who did we lend the {item} to?"), l("who has our {item~} at the moment?", "where's our {item~} gone?"))},
		{who: "other", after: "m", texts: l("Make sure we get it back this time!", "ok", "👍")},
	},
}

var orders = family{
	n: 7,
	slots: map[string][]string{
		"item": l("a new kettle|a replacement kettle", "school shoes for Sam|Sam's shoes for school", "a garden hose|a hosepipe", "printer ink|ink cartridges",
			"a dog bed|a new bed for the puppy", "blackout blinds for Sam's room|darkening blinds for Sam's bedroom", "a new duvet|a winter quilt"),
		"shop": l("Argos", "John Lewis", "Amazon", "Screwfix", "Pets at Home", "Dunelm", "Lakeland"),
		"when": l("Tuesday", "Thursday", "tomorrow", "Saturday", "next week", "Friday", "Monday"),
	},
	reuse: map[string]bool{"when": true},
	steps: []step{
		{who: "adult", key: "shop", texts: l("Ordered {item} from {shop}, arriving {when}.", "{item} ordered from {shop}, should come {when}."),
			ask: q(l("where did we order {item} from?"), l("which shop is {item~} coming from?", "which store did we buy {item~} from?"))},
	},
}

var insurance = family{
	n: 6,
	slots: map[string][]string{
		"kind":    l("car|vehicle", "home|house", "travel|holiday", "pet|dog", "gadget|phone", "breakdown|roadside recovery"),
		"insurer": l("Churchill", "Hastings Direct", "NFU Mutual", "Petplan", "More Than", "Saga", "Zurich"),
		"price":   l("£412 a year", "£23 a month", "£96", "£31 a month", "£8.99 a month", "£388"),
	},
	steps: []step{
		{who: "mother", texts: l("Reminder: the {kind} insurance renews at the end of the month.")},
		{who: "adult", after: "d", key: "insurer", texts: l("Renewed the {kind} insurance with {insurer}, {price}.", "{kind} insurance switched to {insurer} at {price}."),
			ask: q(l("who is the {kind} insurance with now?"), l("which company covers our {kind~} now?", "who's our {kind~} insurer these days?"))},
	},
}

var garden = family{
	n: 6,
	slots: map[string][]string{
		"gardener": l("Green Thumb Services", "Luke Ashby", "Mowbray Gardens", "Terry the tree man", "Fernhill Landscapes", "Sid Baker"),
		"job": l("cut back the hedge|trim the bushes", "mow and edge the lawn|cut the grass", "take down the dead cherry tree|remove the dying tree",
			"fix the fence panel|repair the broken fencing", "clear the gutters|unblock the roof drains", "weed the borders|tidy the flower beds"),
		"price": l("£80", "£35", "£450", "£120", "£65", "£40"),
	},
	steps: []step{
		{who: "person", texts: l("Someone needs to {job} before autumn.", "We really have to {job}.")},
		{who: "adult", after: "d", key: "gardener", texts: l("{gardener} will {job} on Saturday for {price}.", "Hired {gardener} to {job}, {price}."),
			ask: q(l("who's coming to {job}?", "who did we hire to {job}?"), l("which gardener is booked to {job~}?", "who did we pay to {job~}?"))},
	},
}

var backupStory = family{
	instances: []map[string]string{{"_day": "4"}},
	steps: []step{
		{who: "adult", key: "every Sunday night", texts: l("Backup plan for the NAS: it copies everything to the USB disk every Sunday night."),
			ask: q(l("what was the first backup schedule for the NAS?"), l("how often did the server originally copy to the external drive?"))},
		{who: "mother", after: "m", texts: l("Noted. I'll tell you if a backup run fails.")},
		{who: "adult", after: "w", key: "nightly at 2am", texts: l("Change of plan: the NAS backup runs nightly at 2am now; once a week missed too much."),
			ask: q(l("how often does the NAS backup run now?"), l("what's the current schedule for the server snapshots?"))},
		{who: "adult", after: "w", key: "Backblaze B2", texts: l("Agreed: the family photos also go offsite to Backblaze B2 once a week."),
			ask: q(l("where did we first send the offsite photo backup?"), l("which cloud service did we start with for remote copies of the pictures?"))},
		{who: "adult", after: "w", key: "4TB WD Elements", texts: l("The USB backup disk died. Replaced it with a 4TB WD Elements."),
			ask: q(l("what replaced the dead USB backup disk?"), l("which drive did we buy when the external hard drive failed?"))},
		{who: "adult", after: "w", key: "Hetzner Storage Box", texts: l("Backblaze went up in price, so the offsite copy moves to a Hetzner Storage Box (€3.81 a month)."),
			ask: q(l("where does the offsite backup go now?"), l("which provider holds the remote copy of the photos these days?"))},
		{who: "mother", after: "w", key: "18 minutes", texts: l("Restore test passed: last month's photos came back from the NAS snapshot in 18 minutes."),
			ask: q(l("how long did the backup restore test take?"), l("how quickly did we get the pictures back when we tested recovery?"))},
	},
}

var holidayStory = family{
	instances: []map[string]string{{"_day": "8"}},
	steps: []step{
		{who: "adult", key: "Lake Garda", texts: l("Shortlist for the summer holiday: Cornwall, the Algarve or Lake Garda."),
			ask: q(l("which places were on the holiday shortlist?"), l("what destinations did we consider for the summer trip?"))},
		{who: "other", after: "d", texts: l("Algarve please!! Cornwall is always raining", "Garda looks amazing")},
		{who: "adult", after: "d", key: "8–22 August", texts: l("Decided: two weeks in the Algarve, 8–22 August."),
			ask: q(l("where did we decide to go on holiday?"), l("which destination did we pick for the August vacation?"))},
		{who: "adult", after: "d", key: "Bristol to Faro", texts: l("Flights booked: Bristol to Faro with easyJet, out 8 Aug at 06:40."),
			ask: q(l("which airport do our holiday flights leave from?"), l("where do we fly out from for the trip to Portugal?"))},
		{who: "adult", after: "d", key: "Casa Azul", texts: l("Villa booked in Carvoeiro: Casa Azul, pool and three bedrooms, €2,150."),
			ask: q(l("what's the villa we booked called?"), l("what's the name of the holiday rental in Portugal?"))},
		{who: "adult", after: "w", key: "football camp", texts: l("Change: we fly back on the 21st, not the 22nd; Sam's football camp starts on the 22nd."),
			ask: q(l("why did we change the return flight date?"), l("what made us come home a day early from the vacation?"))},
		{who: "child", after: "w", key: "O Bote", texts: l("Best restaurant of the holiday was O Bote in Carvoeiro, get the grilled sardines."),
			ask: q(l("what was the best restaurant on holiday?"), l("where did we eat best in Portugal?"))},
	},
}

var broadbandStory = family{
	instances: []map[string]string{{"_day": "60"}},
	steps: []step{
		{who: "adult", key: "30 September", texts: l("Our broadband contract with BT ends on 30 September."),
			ask: q(l("when does the BT broadband contract end?"), l("when is our internet deal with BT up?"))},
		{who: "adult", after: "w", key: "2 October", texts: l("Switched broadband to Zen, 500Mb fibre, installation on 2 October."),
			ask: q(l("when is the new broadband being installed?"), l("which day is the new internet connection going in?"))},
		{who: "adult", after: "w", key: "mesh point", texts: l("New router's up. A mesh point in Lily's room fixed the weak signal upstairs."),
			ask: q(l("what fixed the weak wifi signal upstairs?"), l("how did we solve the bad wireless upstairs?"))},
	},
}

var carStory = family{
	instances: []map[string]string{{"_day": "95"}},
	steps: []step{
		{who: "adult", key: "corroded brake pipes", texts: l("The Golf failed its MOT: corroded brake pipes, £600 to put right."),
			ask: q(l("why did the Golf fail its MOT?"), l("what was wrong with the car at the inspection?"))},
		{who: "other", after: "h", texts: l("Is it worth fixing? It's 11 years old.", "Maybe time for a new one?")},
		{who: "adult", after: "d", key: "electric car next spring", texts: l("Decided: we fix the Golf this time and look for an electric car next spring."),
			ask: q(l("what did we decide about replacing the Golf?"), l("are we getting a new vehicle now or later?"))},
	},
}

var heatingStory = family{
	instances: []map[string]string{{"_day": "120"}},
	steps: []step{
		{who: "adult", key: "17:00–22:00", texts: l("Heating schedule: on 6:30–8:30 and 17:00–22:00, 19 degrees."),
			ask: q(l("what's the heating schedule?"), l("what hours does the radiator timer come on?"))},
		{who: "adult", after: "w", key: "18 degrees", texts: l("Turning the thermostat down to 18 degrees to save money, wear a jumper."),
			ask: q(l("what temperature did we turn the thermostat down to?"), l("how warm is the house set to now?"))},
	},
}

var screenStory = family{
	instances: []map[string]string{{"_day": "30"}},
	steps: []step{
		{who: "adult", key: "two hours on school days", texts: l("Decided: screen time is two hours on school days, no limit at weekends."),
			ask: q(l("what screen time limit did we first set for school days?"), l("how long could the kids use devices on weekdays at first?"))},
		{who: "child", after: "m", texts: l("that's so unfair", "what about homework on the laptop??")},
		{who: "adult", after: "w", key: "90 minutes", texts: l("Change: school-day screen time is now 90 minutes, the grades dipped."),
			ask: q(l("what did we change the school-day screen time to?"), l("what's the reduced device limit on weekdays?"))},
	},
}

// memoryFacts are lines of Mother's memory file: standing facts, each
// asked about once.
func memoryFacts() family {
	facts := [][3]string{
		{"Lily is allergic to penicillin.", "what is Lily allergic to?", "which medication can't Lily take?"},
		{"Sam is allergic to cats.", "what is Sam allergic to?", "which animal gives Sam an allergy?"},
		{"Guest wifi password: sunflower-42.", "what's the guest wifi password?", "what's the code for the visitors' wireless?"},
		{"The router admin login is on the sticker under the router.", "where is the router admin login?", "where can I find the password for the modem settings?"},
		{"Sam's shoe size is 5 (UK).", "what shoe size is Sam?", "what size trainers does Sam wear?"},
		{"Grandma Rose's GP is Dr Okafor at the Elm Street surgery.", "who is Grandma Rose's GP?", "which doctor does Grandma see?"},
		{"Anna takes oat milk in her coffee, no sugar.", "how does Anna take her coffee?", "what milk does Anna have in her drink?"},
		{"Bin day is Tuesday; recycling goes out every other Tuesday.", "which day is bin day?", "when does the rubbish get collected?"},
		{"The spare house key is with the Hendersons at number 12.", "who has the spare house key?", "where is the extra door key kept?"},
		{"Car registration: KM19 XRT.", "what's the car registration?", "what's the number plate of our vehicle?"},
		{"Home insurance policy number HX-448120 (Aviva).", "what's the home insurance policy number?", "what's the reference for our house cover?"},
		{"Biscuit's microchip number is 985112004455321.", "what's Biscuit's microchip number?", "what's the dog's chip ID?"},
		{"Sam's piano lessons are Thursdays at 5 with Mrs Adeyemi.", "when are Sam's piano lessons?", "what day does Sam have his music class?"},
		{"Lily's football training is Mondays and Wednesdays at 6.", "when is Lily's football training?", "which evenings does Lily have soccer practice?"},
		{"The boiler is a Worcester Greenstar 30i, serviced every October.", "what model is our boiler?", "which make of furnace do we have?"},
		{"Anna's passport expires in March 2028.", "when does Anna's passport expire?", "when does Anna need to renew her passport?"},
		{"Energy (gas and electricity) is with Octopus, fixed until February.", "who is our energy supplier?", "which company provides our power?"},
		{"Tom is vegetarian on weekdays.", "is Tom vegetarian?", "which days does Tom skip meat?"},
		{"Broadband account number 55-10293.", "what's our broadband account number?", "what's the internet provider's customer number?"},
		{"Grandma Rose's landline is 01632 960418.", "what's Grandma Rose's landline number?", "what's Grandma's home phone number?"},
		{"Lily's school is Hillcrest Academy, form 9B.", "what form is Lily in at Hillcrest?", "which class is Lily in at school?"},
		{"The water stopcock is under the kitchen sink, behind the bleach.", "where is the water stopcock?", "where's the main water shut-off valve?"},
		{"Dentist: Smile Studio, Dr Kaur.", "which dentist do we use?", "who's our dental practice?"},
		{"Anna's work mobile: 07700 900123.", "what's Anna's work mobile?", "what's Anna's office phone number?"},
		{"Bedtime on school nights: 9pm for Sam, 10pm for Lily.", "what's Sam's bedtime on school nights?", "what time does Sam go to bed during term?"},
		{"Netflix is on Anna's card; the Spotify family plan on Tom's.", "whose card pays for Netflix?", "who pays for the streaming subscription?"},
		{"Tom's blood group is O negative.", "what's Tom's blood group?", "what blood type is Tom?"},
		{"The alarm code is 4-7-1-9; the panel is in the hall cupboard.", "what's the alarm code?", "what's the PIN for the burglar alarm?"},
		{"Sam's best friend is Noah Fletcher; his mum Claire is on 07700 900456.", "who is Sam's best friend?", "who's Sam's closest mate?"},
		{"Lily's phone contract is with Giffgaff, £10 a month, renews in January.", "who is Lily's phone contract with?", "which network is Lily's mobile on?"},
		{"The loft hatch pole is behind the airing cupboard door.", "where is the loft hatch pole?", "where's the stick for opening the attic hatch?"},
		{"Grandma Rose takes her blood pressure tablets at 8am and 8pm.", "when does Grandma Rose take her blood pressure tablets?", "what times does Grandma need her medication?"},
		{"Sam's school dinner account code is 7731.", "what's Sam's school dinner account code?", "what's the PIN for Sam's meal payments at school?"},
		{"The recycling centre needs a booked slot at weekends.", "do we need to book the recycling centre at weekends?", "can we just turn up at the tip on a Saturday?"},
		{"Biscuit eats 180g of dry food a day, split into two meals.", "how much food does Biscuit get a day?", "how much should the dog be fed daily?"},
		{"The kids' passports are in the blue folder in the study.", "where are the kids' passports kept?", "where do we keep the children's travel documents?"},
		{"The wifi in the garden office is the Marlow-Ext network.", "which wifi network works in the garden office?", "what's the wireless called out in the shed office?"},
	}
	var insts []map[string]string
	for i, f := range facts {
		insts = append(insts, map[string]string{"_day": fmt.Sprint(i * Days / len(facts)), "fact": f[0], "lex": f[1], "para": f[2]})
	}
	return family{instances: insts, steps: []step{
		{who: "memory", key: "fact", texts: l("{fact}"), ask: q(l("{lex}"), l("{para}"))},
	}}
}

// decisions are the household's rules and choices, said once each.
func decisions() family {
	ds := [][3]string{
		{"Decided: no phones at the dinner table, for everyone.", "what did we decide about phones at dinner?", "what's the rule on mobiles during meals?"},
		{"Agreed: Sam's pocket money goes up to £8 a week from September.", "how much pocket money does Sam get now?", "what's Sam's weekly allowance?"},
		{"Decision: Lily can go to the festival if she texts every 3 hours.", "what did we decide about Lily and the festival?", "on what condition is Lily allowed to the music event?"},
		{"Chore rota agreed: Sam does the bins, Lily the dishwasher, swapping monthly.", "who does the bins on the chore rota?", "which kid takes the rubbish out?"},
		{"Settled: Christmas is at ours this year, Grandma Rose stays four nights.", "where are we doing Christmas this year?", "who's hosting the festive holidays?"},
		{"Decided to cancel the gym membership and buy a rowing machine instead.", "did we keep the gym membership?", "what did we do about the fitness subscription?"},
		{"Agreed: a £150 limit for each kid's birthday party.", "what's the limit for kids' birthday parties?", "how much can we spend on a child's celebration?"},
		{"Agreed to get the loft insulated in October; Warmfront quoted £1,100.", "who quoted for the loft insulation?", "which firm priced the attic insulation?"},
		{"Decided not to keep the cleaner on; we split the hoovering between us.", "did we keep the cleaner?", "what happened with the housekeeper?"},
		{"Agreed: Lily can take the bus to town alone on Saturdays.", "can Lily take the bus into town alone?", "is Lily allowed to travel into the centre by herself?"},
		{"Decided: Biscuit is not allowed upstairs any more.", "is Biscuit allowed upstairs?", "where is the dog banned from?"},
		{"Agreed to put £200 a month into the holiday savings pot.", "how much goes into the holiday savings each month?", "what do we save monthly for vacations?"},
		{"Agreed: no more Sunday roast at Grandma's every week; she comes to us on the first Sunday of the month instead.", "what did we agree about Sunday roast at Grandma's?", "how often does Grandma come over for the weekend dinner now?"},
		{"Decided: Lily gets a phone upgrade at Christmas if her mocks go well.", "when does Lily get her phone upgrade?", "on what condition can Lily have a new mobile?"},
		{"Agreed: no more takeaways on weeknights, Fridays only.", "which night can we have a takeaway?", "when are we allowed to order food in?"},
		{"Decided to switch Biscuit to grain-free food on the vet's advice.", "what food did we switch Biscuit to?", "what diet is the dog on now?"},
	}
	var insts []map[string]string
	for i, d := range ds {
		insts = append(insts, map[string]string{"_day": fmt.Sprint(3 + i*Days/len(ds)), "text": d[0], "lex": d[1], "para": d[2]})
	}
	return family{instances: insts, steps: []step{
		{who: "adult", key: "text", texts: l("{text}"), ask: q(l("{lex}"), l("{para}"))},
		{who: "other", after: "m", texts: l("Agreed.", "fine by me", "ok 👍", "Fair enough.")},
	}}
}

// motherAnswers are questions put to Mother and her answers.
func motherAnswers() family {
	as := [][4]string{
		{"how do I top up the boiler pressure?", "To repressurise the boiler: open the filling loop under it until the gauge reads 1.5 bar, then close it.", "how do we repressurise the boiler?", "what's the fix when the furnace pressure drops?"},
		{"what temperature for the roast chicken?", "Roast the chicken at 190°C for 20 minutes per 500g plus 20 minutes.", "what temperature do we roast chicken at?", "how hot should the oven be for the chicken?"},
		{"when do the clocks go back?", "The clocks go back on Sunday 25 October 2026 at 2am.", "when do the clocks go back?", "what date does summer time end?"},
		{"how much is the council's bulky waste collection?", "The council collects up to three bulky items for £35; book it on their website.", "how much does bulky waste collection cost?", "what does the council charge to take big furniture away?"},
		{"what tyre pressure does the Golf need?", "For the Golf: 36 psi front and 33 psi rear, more when fully loaded.", "what tyre pressure does the Golf need?", "how much air for the car's wheels?"},
		{"how long is a passport renewal taking?", "HM Passport Office says to allow three weeks for an online renewal.", "how long does passport renewal take?", "how many weeks to get a new passport?"},
		{"how do I descale the kettle?", "Half fill the kettle with equal parts water and white vinegar, boil, leave an hour, rinse twice.", "how do we descale the kettle?", "how do I get the limescale out of the kettle?"},
		{"what's the number for the non-emergency police?", "The non-emergency police number is 101.", "what's the number for the non-emergency police?", "who do I ring to report something to the police that isn't urgent?"},
		{"how do I get red wine out of the carpet?", "Blot, don't rub; then a paste of bicarbonate of soda and water, leave it to dry and hoover it up.", "how do we get red wine out of the carpet?", "what removes a wine stain from the rug?"},
		{"how long should a soft-boiled egg take?", "Soft-boiled: 6 minutes from the boil; hard-boiled: 9 to 10 minutes.", "how long does a soft-boiled egg take?", "how many minutes to cook an egg so the yolk stays runny?"},
		{"what's the speed limit when towing a trailer?", "With a trailer: 60 mph on motorways and dual carriageways, 50 mph on single carriageways.", "what's the speed limit when towing a trailer?", "how fast can we drive pulling the trailer on the motorway?"},
		{"how long can cooked rice stay in the fridge?", "Cooked rice keeps one day in the fridge; cool it within an hour.", "how long can cooked rice stay in the fridge?", "is leftover rice safe the next day?"},
	}
	var insts []map[string]string
	for _, a := range as {
		insts = append(insts, map[string]string{"ask": a[0], "answer": a[1], "lex": a[2], "para": a[3]})
	}
	return family{instances: insts, steps: []step{
		{who: "person", texts: l("Mother, {ask}", "@mother {ask}")},
		{who: "mother", after: "m", key: "answer", texts: l("{answer}"), ask: q(l("{lex}"), l("{para}"))},
	}}
}

// dailyNotes are the daily log's notes of what happened on a day.
func dailyNotes() family {
	ns := [][3]string{
		{"power cut from 19:10 to 20:40; the freezer stayed shut and was fine.", "when was the power cut?", "how long was the electricity off?"},
		{"boiler engineer visited; pressure topped up, next service due in October.", "when did the boiler engineer visit?", "when did someone come to look at the heating?"},
		{"hailstorm cracked the greenhouse roof; photos sent to the insurer.", "what did the hailstorm damage?", "what got broken in the storm?"},
		{"Biscuit ran off in the park for an hour; found by the pond.", "where was Biscuit found when he ran off?", "where did the dog turn up after he got lost?"},
		{"water off on the street 9:00–13:00 for mains repairs.", "when was the water off for repairs?", "when was there no water supply on the road?"},
		{"Sam broke his wrist at football; cast on for six weeks.", "how long is Sam's cast on for?", "how many weeks does Sam's broken arm need?"},
		{"Lily passed her grade 5 piano exam with merit.", "what did Lily get in her piano exam?", "how did Lily do in her music test?"},
		{"the new fridge-freezer was delivered and the old one taken away.", "when was the new fridge-freezer delivered?", "when did the new refrigerator arrive?"},
		{"Grandma Rose had a fall in the garden; checked at A&E, nothing broken.", "when did Grandma Rose have a fall?", "when did Grandma hurt herself outside?"},
		{"the car battery was flat; Gary jump-started it and it recharged on a long drive.", "when was the car battery flat?", "when did the vehicle not start?"},
	}
	var insts []map[string]string
	for i, n := range ns {
		insts = append(insts, map[string]string{"_day": fmt.Sprint(10 + i*Days/len(ns)), "note": n[0], "lex": n[1], "para": n[2]})
	}
	return family{instances: insts, steps: []step{
		{who: "daily", key: "note", texts: l("Daily log {date}, note: {note}"), ask: q(l("{lex}"), l("{para}"))},
	}}
}

// chickResults are jobs Mother gave a chick and what the chick found.
func chickResults() family {
	cs := [][4]string{
		{"compare broadband deals", "cheapest fibre is Zen at £29 a month, then Vodafone at £31.", "which broadband deal did the chick find cheapest?", "what was the lowest-priced internet provider in the comparison?"},
		{"compare car insurance quotes", "Admiral £412, Direct Line £455, LV £398 for the year.", "what did LV quote for the car insurance?", "how much was LV's vehicle cover price?"},
		{"find holiday cottages in Cornwall for late August", "three under £900 for the week: Trevone Barn, Gull Cottage, The Old Dairy.", "which cottages did the chick find in Cornwall?", "what accommodation came up for the Cornwall trip?"},
		{"summarise the new school uniform policy", "blazers compulsory from September, plain black shoes only, no trainers.", "what's in the new school uniform policy?", "what are the new dress rules at school?"},
		{"organise the holiday photos", "organised 312 holiday photos into folders by day.", "how many holiday photos did the chick organise?", "how many vacation pictures got put into folders?"},
		{"convert the scanned passport forms", "converted the scans to one PDF, saved as passports.pdf in /shared/docs.", "where did the chick save the passport forms PDF?", "where's the combined document of the passport paperwork?"},
		{"compare energy tariffs", "staying on Octopus Flexible saves £11 a month over British Gas.", "which energy tariff did the chick recommend?", "what did the power price comparison say?"},
		{"check the recycling calendar", "glass collection moves to Fridays from October.", "when is the glass collection from October?", "which day do bottles get picked up in autumn?"},
		{"find flights to Lisbon in October", "cheapest is easyJet from Bristol on 14 October, £68 return.", "what were the cheapest flights to Lisbon?", "what was the lowest fare to Portugal's capital?"},
		{"total the summer spending", "£1,942 on the holiday, £310 over budget.", "how much did we spend on the summer holiday?", "what did the vacation cost in the end?"},
		{"find a swimming club for Sam", "Riverside Swim Club has Saturday 9am sessions for under-12s, £32 a month.", "which swimming club did the chick find for Sam?", "what pool sessions came up for Sam?"},
		{"check which bank pays the best savings rate", "best easy-access rate is Chase at 4.1%; ours pays 1.5%.", "which bank had the best savings rate?", "where would our savings earn the most interest?"},
		{"list what we still need for the camping trip", "still missing: a camping stove, two sleeping mats and a lantern.", "what did we still need for the camping trip?", "what kit were we missing to go camping?"},
		{"draft the complaint to the council", "drafted the letter about the pothole on Mill Lane; it's in /shared/letters.", "where is the letter to the council about the pothole?", "where's the complaint about the road damage on Mill Lane?"},
	}
	var insts []map[string]string
	for _, c := range cs {
		insts = append(insts, map[string]string{"task": c[0], "result": c[1], "lex": c[2], "para": c[3]})
	}
	return family{instances: insts, steps: []step{
		{who: "adult", texts: l("Mother, can you get a chick to {task}?", "@mother please {task}")},
		{who: "mother", after: "m", texts: l("Started chick {chick} to {task}.", "On it: chick {chick} will {task}.")},
		{who: "chick", after: "h", key: "result", texts: l("Chick {chick} finished ({task}): {result}", "Chick {chick} is done. {result}"), ask: q(l("{lex}"), l("{para}"))},
	}}
}

// bills are the monthly bills: near-duplicates that differ in the month
// and the amount.
func bills() family {
	months := []string{"June", "July", "August", "September", "October", "November"}
	utils := [][2]string{{"electricity", "power"}, {"water", "water"}}
	amounts := []string{"£96.40", "£41.12", "£88.75", "£39.60", "£79.02", "£44.18", "£101.33", "£40.05", "£123.90", "£43.70", "£141.65", "£45.20"}
	var insts []map[string]string
	for i, m := range months {
		for j, u := range utils {
			insts = append(insts, map[string]string{"_day": fmt.Sprint(30*i + 25 + 3*j), "month": m, "util": u[0] + "|" + u[1],
				"amount": amounts[2*i+j]})
		}
	}
	return family{instances: insts, steps: []step{
		{who: "adult", key: "amount", texts: l("The {month} {util} bill came in at {amount}.", "{util} bill for {month}: {amount}, paid."),
			ask: q(l("how much was the {util} bill for {month}?"), l("what did we pay for {util~} in {month}?", "what was the {month} {util~} cost?"))},
	}}
}

// memoryNoise are memory-file lines no question asks about: they share
// words with those that are asked about.
func memoryNoise() family {
	lines := l("Tom likes his steak medium rare.", "Anna's favourite flowers are tulips.", "Sam supports Bristol City.",
		"Lily is saving up for a guitar.", "Grandma Rose prefers phone calls to texts.", "Biscuit is scared of fireworks; keep him in on bonfire night.",
		"The kids' swimming towels live in the blue bag.", "Tom's mum's birthday is in April.", "The wifi upstairs drops when the microwave is on.",
		"Anna does the food shop on Thursdays.", "The car's spare key is in the kitchen drawer.", "Sam hates mushrooms.")
	var insts []map[string]string
	for i, t := range lines {
		insts = append(insts, map[string]string{"_day": fmt.Sprint(5 + i*Days/len(lines)), "text": t})
	}
	return family{instances: insts, steps: []step{{who: "memory", texts: l("{text}")}}}
}

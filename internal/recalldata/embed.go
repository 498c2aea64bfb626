package recalldata

import (
	"hash/fnv"
	"math"
	"strings"
	"unicode"
)

// Dims is the length of an Embed vector.
const Dims = 256

// slots is how many dimensions each concept or word is spread over.
const slots = 4

// Weights of a token in an Embed vector: a word the lexicon knows counts
// as its concept; a word it does not know counts weakly as itself (names,
// numbers, rare words), so exact matches still help a little, as they do
// in a real model.
const (
	conceptWeight = 1.0
	lightWeight   = 0.5
	unknownWeight = 0.7
	numberWeight  = 0.25
	// textWeight is the weight of a component of its own that every
	// distinct text gets (hashed from the whole text): what a real model
	// encodes besides the concepts (phrasing, tone, word order). It keeps
	// a text of one word from matching every text with that word as
	// closely as a text that says the same thing at length.
	textWeight = 0.8
)

// Embed is a deterministic stand-in for a text embedding model: a bag of
// concepts. Each word is lower-cased and looked up (as it is, then
// stemmed) in a general lexicon of synonym groups (lexicon below: "leak",
// "drip" and "dripping" are one concept; "plumber" and "plumbing"
// another); each concept is hashed into two of Dims dimensions with a
// sign, words the lexicon does not know are hashed weakly, stop words
// count for nothing, and the sum is scaled to unit length. Texts that say
// the same thing in other words therefore come out close, as with a real
// model, and unrelated texts nearly orthogonal.
//
// The lexicon is general vocabulary: it knows no message, question or
// answer of History. A text with no word that counts (only stop words,
// only emoji) is its own text component alone.
func Embed(text string) []float32 {
	v := make([]float64, Dims)
	seen := map[string]bool{}
	for _, w := range Words(text) {
		if stopWords[w] || seen[w] {
			continue
		}
		seen[w] = true
		if c, ok := Concept(w); ok {
			weight := conceptWeight
			if lightConcepts[c] {
				weight = lightWeight
			}
			addHashed(v, "c:"+c, weight)
		} else if isNumber(w) {
			addHashed(v, "w:"+w, numberWeight)
		} else {
			addHashed(v, "w:"+Stem(w), unknownWeight)
		}
	}
	addHashed(v, "t:"+strings.Join(Words(text), " "), textWeight)
	out := make([]float32, Dims)
	var sum float64
	for _, x := range v {
		sum += x * x
	}
	norm := math.Sqrt(sum)
	for i, x := range v {
		out[i] = float32(x / norm)
	}
	return out
}

// addHashed adds weight to slots distinct dimensions of v chosen by
// hashing key, each with a sign from the hash: a key spread over several
// dimensions makes a collision with another key cost little.
func addHashed(v []float64, key string, weight float64) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	x := mix(h.Sum64())
	w := weight / math.Sqrt(slots)
	used := [slots]int{}
	for i := 0; i < slots; i++ {
		idx := int(x % Dims)
		x = mix(x + 0x9e3779b97f4a7c15)
		for j := 0; j < i; j++ {
			if used[j] == idx { // taken: the next free one
				idx = (idx + 1) % Dims
				j = -1
			}
		}
		used[i] = idx
		sign := 1.0
		if x&1 == 1 {
			sign = -1
		}
		v[idx] += sign * w
	}
}

// mix spreads every bit of x over all bits (FNV's low bits depend only
// on its input's low bits).
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func isNumber(w string) bool {
	for _, r := range w {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// Words splits text into lower-cased words: runs of letters and digits,
// apostrophes dropped ("don't" is "dont").
func Words(text string) []string {
	text = strings.ToLower(strings.ReplaceAll(strings.ReplaceAll(text, "'", ""), "’", ""))
	return strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// Concept returns the concept a word belongs to in the lexicon, trying
// the word as it is and then its stem.
func Concept(w string) (string, bool) {
	if c, ok := lexicon[w]; ok {
		return c, true
	}
	c, ok := lexicon[Stem(w)]
	return c, ok
}

// Stem strips a common English inflection: a light stemmer, enough to
// join "leaks", "leaked" and "leaking" to "leak" where the lexicon does
// not list them.
func Stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+2 && strings.HasSuffix(w, suf) {
			s := strings.TrimSuffix(w, suf)
			if suf == "s" && strings.HasSuffix(s, "s") {
				return w // "glass", "class"
			}
			return s
		}
	}
	return w
}

// stopWords count for nothing in Embed: function words and the chat's
// filler, which a real model also mostly looks through.
var stopWords = set(`a an the and or but if then so of to in on at by for from with
about as into over under after before up down out off again is are was were be been being
am do does did doing have has had having i me my we us our you your he him his she her
they them their it its this that these those there here what which who whom whose when
where why how all any both each few more most other some such no nor not only own same
than too very can will just should would could shall may might must also ok okay yes yeah
hi hey please thanks thank lol oh well still even get got let lets im ive youre were dont
didnt doesnt isnt wasnt thats whats its one did again whos wheres hows whens whys theres heres
cant wont ill youll shes hes weve theyre id someone anyone anything something everyone now
much many need needs going make made say said way also like really just know think want
go goes went gone getting gets come comes came coming fyi back next`)

// lightConcepts are concepts so common in any chat that a real model
// gives them little weight: they count half.
var lightConcepts = set(`decide call book change fix run plan note remind buy pay visit today
tomorrow morning evening afternoon early late weekend email problem new list check
kids son daughter mum dad weekly monthly daily monday tuesday wednesday thursday friday
saturday sunday yesterday money price number end work`)

// synonyms is the lexicon's source: one group a line, the group's first
// word naming its concept. They are general English synonym groups and
// inflections (the household, money, health, travel, computers, the
// calendar), written without looking at any question.
const synonyms = `
plumber plumbers plumbing
blocked blockage clogged clog clogs unblock unblocked
plughole
leak leaks leaking leaked leaky drip drips dripping dripped seep seeping
tap taps faucet faucets spigot
pipe pipes pipework drain drains drainage
sink sinks basin washbasin
toilet toilets loo lavatory wc
shower showers bath bathtub
electrician electricians sparky electrics electrical wiring wires wire cable cables
fuse fuses breaker breakers tripped
socket sockets outlet outlets plug plugs
light lights lamp lamps bulb bulbs
flicker flickering flickers blink blinking blinks
hall hallway landing corridor
lounge living
home homes house houses household
heating heater heaters radiator radiators boiler boilers furnace
engineer engineers technician technicians repairman
thermostat thermostats temperature hot warm warmer heat
cold chilly freezing colder cool cooler
broken broke break breaks faulty bust busted dead failed failing fails fail crack cracked cracks chipped damage damaged died die dies
fix fixed fixes fixing repair repaired repairs repairing mend mended sort sorted solve solved
replace replaced replacing replacement swap swapped
backup backups backed archive archives archived snapshot snapshots copy copies
nas server servers homeserver
disk disks drive drives ssd hdd harddrive storage
cloud offsite remote online
daily nightly night nights
weekly week weeks fortnightly
monthly month months
schedule scheduled schedules scheduling timetable rota timer timers
run runs running ran race races
decide decided decision decisions agree agreed agreement settle settled chose choose chosen pick picked opted
change changed changing changes switch switched switching move moved revise revised instead
cancel cancelled canceled cancelling cancellation drop dropped scrap scrapped
book booked booking bookings reserve reserved reservation
appointment appointments appt slot
call called calling ring rang phoned rung
email emailed emails mail mailed message messaged text texted
car cars vehicle vehicles motor golf
registration reg plate numberplate
mechanic mechanics garage garages workshop
windscreen windshield windscreens
service serviced servicing mot inspection inspected
tyre tyres tire tires wheel wheels puncture
brake brakes braking
oil
insurance insurer insured insure policy policies cover coverage
renew renewal renewed renewing renews expire expires expiry expiring
premium premiums
price prices cost costs costing costed fee fees charge charged charges fare fares priced quote quotes quoted
cheap cheaper cheapest inexpensive affordable bargain lowest
expensive pricey dearer costly
pay paid paying payment payments transfer transferred
bill bills invoice invoices receipt receipts
budget budgets budgeting spending spend spent
money cash pounds euros dollars quid allowance
bank banks account accounts customer customers
save saved saving savings
vet vets veterinary veterinarian
dog dogs puppy puppies pup
cat cats kitten kittens
pet pets animal animals
vaccination vaccinations vaccine vaccines vaccinated jab jabs booster boosters shot shots
worm worming flea fleas tick ticks
walk walks walked walking
food feed fed feeding kibble
dentist dentists dental teeth tooth
eye eyes vision sight optician opticians optometrist
ear ears hearing
infection infected infections
doctor doctors gp physician surgery clinic
medicine medicines medication prescription prescriptions pills tablets penicillin antibiotic antibiotics dose doses
sick ill illness unwell poorly flu cold fever
hospital hospitals
holiday holidays vacation vacations trip trips getaway break travel travelling
flight flights fly flying plane airline airport
hotel hotels accommodation airbnb apartment cottage cottages villa villas rental rentals
destination destinations place places location locations
train trains rail railway
ticket tickets
passport passports visa
beach seaside coast
camping camp tent campsite
school schools
teacher teachers tutor
homework assignment assignments
term terms semester
exam exams test tests mock mocks
check checks checked checking checkup
uniform uniforms dress blazer blazers
birthday birthdays bday
party parties celebration celebrate celebrating
festival festivals concert concerts gig gigs
cake cakes
gift gifts present presents voucher vouchers giftcard
invite invites invited invitation invitations
groceries grocery shopping shop shops supermarket store
buy bought buying purchase purchased purchasing order ordered ordering
milk
bread
recipe recipes dish dishes
dinner dinners supper meal meals tea
lunch lunches
breakfast
cook cooked cooking bake baked baking roast roasted roasting
vegetarian veggie vegan meat
allergy allergies allergic
garden gardens yard backyard
flower flowers flowerbed flowerbeds border borders
weed weeds weeding tidy tidied
lawn lawns grass
mow mower mowing mowed
hedge hedges bush bushes shrub shrubs
gardener gardeners landscaper
tree trees
fence fences fencing
wifi wireless
router routers modem hub
internet broadband connection fibre fiber isp
slow sluggish laggy
fast faster quick quicker speedy
password passwords passcode pin code codes login logins signin username admin credentials
guest guests visitor visitors
laptop laptops computer computers pc notebook
phone phones mobile mobiles smartphone iphone android landline landlines
printer printers printing print printed
update updates updated upgrade upgraded upgrading
install installed installing installation setup
cleaner cleaners cleaning clean cleaned housekeeper
hoover hoovering vacuum vacuuming
laundry washing washer
dishwasher
fridge fridges freezer refrigerator
oven ovens cooker hob stove
bin bins rubbish trash garbage refuse waste
recycling recycle recycled tip dump
collection collected collect pickup
babysitter babysitters sitter childminder nanny childcare babysit babysitting babysat mind minding sit sitting
theatre theater play plays musical
kids kid children child
son sons boy
daughter daughters girl
grandma granny nan nana grandmother
grandpa grandad granddad grandfather
mum mom mother
dad father
visit visits visiting visited stay staying
weekend weekends saturday sunday
monday
tuesday
wednesday
thursday
friday
morning mornings am
afternoon afternoons
evening evenings pm tonight
tomorrow
yesterday
today
early earlier
late later
remind reminder reminders reminded
forget forgot forgotten
photo photos picture pictures pics image images
video videos
music song songs playlist spotify piano guitar violin instrument
movie movies film films cinema
novel novels reading read books
football soccer
swimming swim swimmer pool
lesson lessons class classes
gym fitness workout exercise
key keys spare
lock locks locked locksmith
door doors
window windows glazing
roof roofs gutter gutters
paint painted painting painter decorator decorating
flooring floor floors
furniture sofa couch table chairs
mattress bed beds
kitchen kitchens
bathroom bathrooms
bedroom bedrooms
loft attic
basement cellar
shed sheds
neighbour neighbours neighbor neighbors
council
tax taxes
electricity electric power
gas
energy supplier suppliers tariff tariffs provider providers provide provides provided
solar panels
water
noise noisy loud
smell smells smelly
damp mould mold condensation
contract contracts deal deals
end ends ending ended finish finishes finished
compare compared comparison comparing
document documents pdf paperwork form forms scan scans scanned
bulky big large huge
work office job jobs workplace
rule rules allowed allow permission condition conditions compulsory mandatory required
outage outages
cut cuts cutting trim trimmed trimming prune pruning
dark darken darkening blackout
screen screens device devices tablet ipad
haircut haircuts hairdresser hairdressers barber hair
hose hoses hosepipe
road roads street streets lane lanes pothole potholes
christmas xmas festive
restaurant restaurants eat ate eating dining cafe
descale descaling limescale
microchip chip
number numbers id reference
training practice practise rehearsal
restore restored restoring recovery recover recovered
storm storms hailstorm hail thunderstorm
borrow borrowed borrowing lend lent lending loan loans loaned
trimmer trimmers cutter cutters clippers shears
alarm alarms detector detectors sensor sensors
beep beeps beeping chirp chirps chirping
sport sports athletics
weight weigh weighed weighs weighing
glass bottles bottle jars
duvet duvets quilt quilts bedding
insulation insulated insulate
skin dermatology dermatologist rash eczema
stopcock valve valves shutoff
shortlist shortlisted consider considered option options
weak poor bad
friend friends mate mates buddy pal pals
network networks carrier
stain stains spill
police
carpet carpets rug rugs
model models brand brands
ink cartridge cartridges toner
portugal portuguese algarve lisbon faro carvoeiro porto
limit limits cap
deposit deposits
landlord landlords letting
mortgage mortgages remortgage
subscription subscriptions subscribe subscribed membership
netflix streaming
certificate certificates cert
deadline deadlines due
plan plans planned planning
meeting meetings meet met
idea ideas suggestion suggestions proposal proposed propose suggest suggested
problem problems issue issues trouble fault faults
error errors
crash crashed crashes crashing froze frozen freeze
report reports summary summaries
note notes noted
list lists
minutes
`

// lexicon maps every word of synonyms to its group's concept.
var lexicon = func() map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(synonyms, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, w := range f {
			if _, dup := m[w]; !dup {
				m[w] = f[0]
			}
		}
	}
	return m
}()

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
